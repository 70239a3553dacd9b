"""agq-switch refuses bad input with a clear message and a non-zero exit,
and leaves nothing half-started (no process, no control socket)."""
import re

from harness import unique_prefix, binary, eal_args, run

GOOD = """[switch]
pipeline = "classic"
[classic]
ps_port = 0
worker_ports = [1]
"""


def switch(tmp_path, app_args, n_ports=2, extra_vdevs=()):
    vdevs = [f"net_null{i}" for i in range(n_ports)] + list(extra_vdevs)
    return run([binary("agq-switch"), *eal_args(unique_prefix("cli"), "0", vdevs), "--", *app_args],
               timeout=30)


def test_help_is_printed_without_eal():
    r = run([binary("agq-switch"), "--help"])
    assert r.returncode == 0
    assert "--config" in r.stdout and "--vdev" in r.stdout


def test_bad_flag_prints_usage_and_exits_2(tmp_path):
    (tmp_path / "c.toml").write_text(GOOD)
    r = switch(tmp_path, ["--config", tmp_path / "c.toml", "--no-such-flag"])
    assert r.returncode == 2, r.stdout + r.stderr
    assert "no-such-flag" in r.stdout + r.stderr


def test_missing_config_names_the_file(tmp_path):
    r = switch(tmp_path, ["--config", tmp_path / "absent.toml", "--ctl-socket", tmp_path / "s"])
    assert r.returncode == 1
    assert "absent.toml" in r.stderr
    assert not (tmp_path / "s").exists()


def test_config_port_that_does_not_exist(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text(GOOD.replace("worker_ports = [1]", "worker_ports = [1, 7]"))
    sock = tmp_path / "s"
    r = switch(tmp_path, ["--config", cfg, "--ctl-socket", sock])
    assert r.returncode == 1, r.stdout + r.stderr
    msg = r.stderr
    assert f"{cfg}:5" in msg and "worker_ports" in msg and "7" in msg, msg
    assert not sock.exists()


def test_config_typo_names_line_and_field(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text(GOOD + "[l2]\nlearnin = true\n")
    r = switch(tmp_path, ["--config", cfg, "--ctl-socket", tmp_path / "s"])
    assert r.returncode == 1
    assert re.search(rf"{re.escape(str(cfg))}:7\b", r.stderr) and "learnin" in r.stderr, r.stderr


def test_config_bad_value_type(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text(GOOD.replace("ps_port = 0", 'ps_port = "zero"'))
    r = switch(tmp_path, ["--config", cfg, "--ctl-socket", tmp_path / "s"])
    assert r.returncode == 1
    assert f"{cfg}:4" in r.stderr and "ps_port" in r.stderr, r.stderr


def test_unknown_vdev_fails_cleanly(tmp_path):
    (tmp_path / "c.toml").write_text(GOOD)
    r = switch(tmp_path, ["--config", tmp_path / "c.toml", "--ctl-socket", tmp_path / "s"],
               extra_vdevs=["net_doesnotexist0"])
    assert r.returncode != 0
    assert not (tmp_path / "s").exists()
