-- Wireshark / tshark dissector for agq-switch's two wire formats:
--   agq          UDP port 50100, docs/PROTOCOL.md section 1 (the project's protocol)
--   agq_classic  UDP ports 50000/50001, the published AGQ program's 73-byte
--                header (docs/CLASSIC.md, shared/reference/agq-published-program.md)
-- Field names are the documents' names: agq.job_id, agq.req_width, agq.min_width
-- (DATA's byte 13), agq.width (the same byte in every other type), agq.epoch,
-- agq.lane, agq_classic.jobAndSeq, agq_classic.hashID ...
--
-- Install (one line): mkdir -p ~/.local/lib/wireshark/plugins && cp tools/wireshark/agq.lua ~/.local/lib/wireshark/plugins/
-- or for one run:     tshark -X lua_script:tools/wireshark/agq.lua -r capture.pcapng -O agq

local AGQ_PORT = 50100
local CLASSIC_PORTS = { 50000, 50001 }

---------------------------------------------------------------- agq
local agq = Proto("agq", "AGQ in-network aggregation (agq-switch)")

local types = { [1] = "DATA", [2] = "RESULT", [3] = "PS_RESULT", [4] = "FALLBACK_DATA" }

local f = agq.fields
f.ver         = ProtoField.uint8("agq.ver", "ver", base.DEC, nil, 0xF0)
f.type        = ProtoField.uint8("agq.type", "type", base.DEC, types, 0x0F)
f.flags       = ProtoField.uint8("agq.flags", "flags", base.HEX)
f.f_version   = ProtoField.bool("agq.flags.version", "VERSION (v of the slot)", 8, nil, 0x01)
f.f_retransmit= ProtoField.bool("agq.flags.retransmit", "RETRANSMIT", 8, nil, 0x02)
f.f_overflow  = ProtoField.bool("agq.flags.overflow", "OVERFLOW", 8, nil, 0x04)
f.f_fallback  = ProtoField.bool("agq.flags.fallback", "FALLBACK (computed by the PS)", 8, nil, 0x08)
f.job_id      = ProtoField.uint16("agq.job_id", "job_id")
f.worker_id   = ProtoField.uint8("agq.worker_id", "worker_id")
f.num_workers = ProtoField.uint8("agq.num_workers", "num_workers")
f.slot        = ProtoField.uint16("agq.slot", "slot")
f.seq         = ProtoField.uint32("agq.seq", "seq")
f.req_width   = ProtoField.uint8("agq.req_width", "req_width (bits)")
f.min_width   = ProtoField.uint8("agq.min_width", "min_width (bits: the narrowest grant the workers accept)")
f.width       = ProtoField.uint8("agq.width", "width (bits granted; 0 = PS fallback)")
f.pos         = ProtoField.uint8("agq.pos", "pos (first 4-bit unit)")
f.guard       = ProtoField.uint8("agq.guard", "guard (bits)")
f.exponent    = ProtoField.int8("agq.exponent", "exponent")
f.n_lanes     = ProtoField.uint8("agq.n_lanes", "n_lanes")
f.epoch       = ProtoField.uint16("agq.epoch", "epoch", base.DEC_HEX)
f.lanes       = ProtoField.bytes("agq.lanes", "lanes")
f.lane        = ProtoField.uint32("agq.lane", "lane", base.HEX)
f.shard       = ProtoField.uint16("agq.shard", "shard (UDP source port 0xC000 | shard)")

local e_short = ProtoExpert.new("agq.short", "agq header shorter than 20 + 4 * lanes bytes (malformed: the switch drops it)",
                                expert.group.MALFORMED, expert.severity.ERROR)
local e_ver = ProtoExpert.new("agq.bad_ver", "ver is not 1", expert.group.MALFORMED, expert.severity.WARN)
agq.experts = { e_short, e_ver }

local udp_srcport = Field.new("udp.srcport")

function agq.dissector(tvb, pinfo, tree)
  if tvb:len() < 20 then
    local t = tree:add(agq, tvb(), "AGQ (truncated)")
    t:add_proto_expert_info(e_short)
    return
  end
  pinfo.cols.protocol = "AGQ"
  local n_lanes = tvb(17, 1):uint()
  local carried = (n_lanes == 16) and 16 or 32   -- lane profile 16, else 32 (section 1, 10)
  local hlen = 20 + 4 * carried
  local t = tree:add(agq, tvb(0, math.min(hlen, tvb:len())))
  local ver = tvb(0, 1):bitfield(0, 4)
  local ti = t:add(f.ver, tvb(0, 1))
  if ver ~= 1 then ti:add_proto_expert_info(e_ver) end
  t:add(f.type, tvb(0, 1))
  local ft = t:add(f.flags, tvb(1, 1))
  ft:add(f.f_version, tvb(1, 1))
  ft:add(f.f_retransmit, tvb(1, 1))
  ft:add(f.f_overflow, tvb(1, 1))
  ft:add(f.f_fallback, tvb(1, 1))
  t:add(f.job_id, tvb(2, 2))
  t:add(f.worker_id, tvb(4, 1))
  t:add(f.num_workers, tvb(5, 1))
  t:add(f.slot, tvb(6, 2))
  t:add(f.seq, tvb(8, 4))
  t:add(f.req_width, tvb(12, 1))
  local ty = tvb(0, 1):bitfield(4, 4)
  -- byte 13: a DATA's min_width, the granted width in what the switch makes (section 1)
  if ty == 1 then t:add(f.min_width, tvb(13, 1)) else t:add(f.width, tvb(13, 1)) end
  t:add(f.pos, tvb(14, 1))
  t:add(f.guard, tvb(15, 1))
  t:add(f.exponent, tvb(16, 1))
  t:add(f.n_lanes, tvb(17, 1))
  t:add(f.epoch, tvb(18, 2))
  local sport = udp_srcport()
  if sport and bit.band(sport.value, 0xC000) == 0xC000 then
    t:add(f.shard, bit.band(sport.value, 0x0FFF)):set_generated()
  end
  if tvb:len() < hlen then
    t:add_proto_expert_info(e_short)
  else
    local lt = t:add(f.lanes, tvb(20, 4 * carried))
    lt:set_text(string.format("lanes: %d x 32 bits", carried))
    for k = 0, carried - 1 do
      local item = lt:add(f.lane, tvb(20 + 4 * k, 4))
      item:prepend_text(string.format("[%02d] ", k))
    end
  end

  local flags = tvb(1, 1):uint()
  local names = {}
  if bit.band(flags, 2) ~= 0 then names[#names + 1] = "RETRANSMIT" end
  if bit.band(flags, 4) ~= 0 then names[#names + 1] = "OVERFLOW" end
  if bit.band(flags, 8) ~= 0 then names[#names + 1] = "FALLBACK" end
  local info = string.format("%s job %d slot %d v%d seq %d", types[ty] or ("type " .. ty), tvb(2, 2):uint(),
                             tvb(6, 2):uint(), bit.band(flags, 1), tvb(8, 4):uint())
  if ty == 1 then
    info = info .. string.format(" worker %d/%d req %d min %d", tvb(4, 1):uint(), tvb(5, 1):uint(), tvb(12, 1):uint(),
                                 tvb(13, 1):uint())
  elseif ty == 4 then
    info = info .. string.format(" worker %d/%d req %d", tvb(4, 1):uint(), tvb(5, 1):uint(), tvb(12, 1):uint())
  else
    info = info .. string.format(" width %d pos %d epoch %d", tvb(13, 1):uint(), tvb(14, 1):uint(), tvb(18, 2):uint())
  end
  if #names > 0 then info = info .. " [" .. table.concat(names, ",") .. "]" end
  pinfo.cols.info = info
end

DissectorTable.get("udp.port"):add(AGQ_PORT, agq)

---------------------------------------------------------------- classic
local classic = Proto("agq_classic", "AGQ classic header (published AGQ program)")
local c = classic.fields
c.jobAndSeq     = ProtoField.uint16("agq_classic.jobAndSeq", "jobAndSeq")
c.workerID      = ProtoField.uint8("agq_classic.workerID", "workerID")
c.total_workers = ProtoField.uint8("agq_classic.total_workers", "total_workers")
c.data          = ProtoField.uint32("agq_classic.data", "data", base.HEX)
c.isACK         = ProtoField.uint8("agq_classic.isACK", "isACK")
c.hashID        = ProtoField.uint16("agq_classic.hashID", "hashID")
c.hash1         = ProtoField.uint16("agq_classic.hash1", "hash1", base.DEC, nil, 0xFFF8)
c.hash2         = ProtoField.uint16("agq_classic.hash2", "hash2", base.DEC, nil, 0x0007)

local e_cshort = ProtoExpert.new("agq_classic.short", "classic header shorter than 73 bytes", expert.group.MALFORMED,
                                 expert.severity.ERROR)
local e_hash = ProtoExpert.new("agq_classic.hash_mismatch", "hashID != (hash1 << 3) | hash2 (the switch does not check)",
                               expert.group.PROTOCOL, expert.severity.NOTE)
classic.experts = { e_cshort, e_hash }

function classic.dissector(tvb, pinfo, tree)
  pinfo.cols.protocol = "AGQ-classic"
  local t = tree:add(classic, tvb(0, math.min(73, tvb:len())))
  if tvb:len() < 73 then
    t:add_proto_expert_info(e_cshort)
    return
  end
  t:add(c.jobAndSeq, tvb(0, 2))
  t:add(c.workerID, tvb(2, 1))
  t:add(c.total_workers, tvb(3, 1))
  for k = 0, 15 do
    t:add(c.data, tvb(4 + 4 * k, 4)):prepend_text(string.format("[data%d] ", k))
  end
  t:add(c.isACK, tvb(68, 1))
  t:add(c.hashID, tvb(69, 2))
  local hi = t:add(c.hash1, tvb(71, 2))
  t:add(c.hash2, tvb(71, 2))
  local h = tvb(71, 2):uint()
  if h ~= tvb(69, 2):uint() then  -- the 16 bits hash1:13|hash2:3 are hashID itself
    hi:add_proto_expert_info(e_hash)
  end
  local ack = tvb(68, 1):uint()
  pinfo.cols.info = string.format("%s jobAndSeq %d worker %d/%d hashID %d", ack == 0 and "data" or ("ACK(" .. ack .. ")"),
                                  tvb(0, 2):uint(), tvb(2, 1):uint(), tvb(3, 1):uint(), tvb(69, 2):uint())
end

for _, p in ipairs(CLASSIC_PORTS) do DissectorTable.get("udp.port"):add(p, classic) end
