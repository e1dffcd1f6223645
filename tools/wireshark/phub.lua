-- Wireshark/tshark dissector for phub's wire protocol, version 3 (docs/protocol.md): header, opcodes, sessions, handshakes, hub forwards, probes.
--
-- Load it with `tshark -X lua_script:tools/wireshark/phub.lua`, or copy it to ~/.local/lib/wireshark/plugins/.
-- It claims UDP datagrams that start with the magic "PH" (a heuristic), and every datagram to or from the
-- UDP ports of the preference "phub.ports" (so that a frame with a bad magic on a phub port is shown as
-- malformed rather than as data). Anything wrong is an expert item, never a Lua error.
--
-- The protocol is described by the tables below. A new opcode is one entry of OPCODES naming its payload
-- kind (a key of PAYLOADS) and what its aux and crc32c fields hold; a new payload layout is one function in
-- PAYLOADS; a new error status is one entry of STATUSES.

local phub = Proto("phub", "phub parameter-server protocol")

local MAGIC = 0x5048
local VERSION = 3
local HEADER_BYTES = 54

-- Meanings of the crc32c and aux fields, named per opcode below.
local CRC_PAYLOAD = "crc"          -- the payload's CRC32C when the crc flag is set (else 0), or with the mac flag the MAC's high half
local CRC_COOKIE = "cookie"        -- joined: the address cookie of the join's source
local CRC_HUB_MAC = "hub_mac"      -- hub opcodes: the high half of the forward payload MAC
local AUX_COOKIE = "cookie"        -- the sender's address cookie, or with the mac flag the MAC's low half
local AUX_INCARNATION = "incarnation"
local AUX_ERROR = "error_detail"   -- see STATUSES
local AUX_HUB_MAC = "hub_mac"      -- the low half of the forward payload MAC
local AUX_NONCE = "probe_nonce"    -- the prober's nonce
local AUX_NONE = "none"

-- Every opcode: name, direction, payload kind (PAYLOADS), what aux and crc32c hold, whether it travels between
-- hubs (job-key tags and a payload MAC, never a session packet), and notes on header fields it uses its own way.
local OPCODES = {
  [1] = { name = "push", dir = "worker -> server", payload = "elements", aux = AUX_COOKIE, crc = CRC_PAYLOAD },
  [2] = { name = "result", dir = "server -> worker", payload = "elements", aux = AUX_NONE, crc = CRC_PAYLOAD },
  [3] = { name = "rerequest", dir = "worker -> server", payload = "none", aux = AUX_COOKIE, crc = CRC_PAYLOAD },
  [4] = { name = "fwd_partial", dir = "rack hub -> home hub", payload = "elements", aux = AUX_HUB_MAC, crc = CRC_HUB_MAC, hub = true,
          notes = { rank = "the sending hub's rack index" } },
  [5] = { name = "fwd_result", dir = "home hub -> rack hub", payload = "elements", aux = AUX_HUB_MAC, crc = CRC_HUB_MAC, hub = true,
          notes = { rank = "the addressed hub's rack index" } },
  [6] = { name = "error", dir = "server -> worker", payload = "none", aux = AUX_ERROR, crc = CRC_PAYLOAD,
          notes = { rank = "the rank addressed", epoch = "the epoch of the packet answered" } },
  [7] = { name = "join", dir = "worker -> server", payload = "join", aux = AUX_INCARNATION, crc = CRC_PAYLOAD },
  [8] = { name = "leave", dir = "worker -> server", payload = "none", aux = AUX_INCARNATION, crc = CRC_PAYLOAD },
  [9] = { name = "probe_request", dir = "prober -> peer", payload = "probe", aux = AUX_NONCE, crc = CRC_PAYLOAD },
  [10] = { name = "probe_reply", dir = "peer -> prober", payload = "probe", aux = AUX_NONCE, crc = CRC_PAYLOAD },
  [11] = { name = "init", dir = "rank 0 -> server (ps)", payload = "elements", aux = AUX_COOKIE, crc = CRC_PAYLOAD },
  [12] = { name = "pull", dir = "worker -> server (ps)", payload = "none", aux = AUX_COOKIE, crc = CRC_PAYLOAD },
  [13] = { name = "joined", dir = "server -> worker", payload = "joined", aux = AUX_INCARNATION, crc = CRC_COOKIE,
           notes = { round = "the epoch's first round", elem_offset = "the incarnation that holds rank 0",
                     epoch = "the job's epoch on this lcore",
                     chunk_id = "the lcore's interface address, IPv4 as a number (0: no chunk-to-interface map)" } },
  [14] = { name = "hub_state", dir = "hub <-> hub", payload = "hub_state", aux = AUX_HUB_MAC, crc = CRC_HUB_MAC, hub = true,
           notes = { rank = "the sending hub's rack index", epoch = "the sending hub's epoch of the job" } },
  [15] = { name = "fwd_init", dir = "rack hub -> home hub (ps)", payload = "elements_or_none", aux = AUX_HUB_MAC, crc = CRC_HUB_MAC, hub = true,
           notes = { rank = "the sending hub's rack index" } },
  [16] = { name = "hparams", dir = "worker <-> server (ps)", payload = "hparams_or_none", aux = AUX_COOKIE, crc = CRC_PAYLOAD,
           notes = { chunk_id = "the set's id, high half", elem_offset = "the set's id, low half" } },
  [17] = { name = "fwd_hparams", dir = "rack hub <-> home hub (ps)", payload = "hparams_or_none", aux = AUX_HUB_MAC, crc = CRC_HUB_MAC, hub = true,
           notes = { rank = "the sending hub's rack index", chunk_id = "the set's id, high half",
                     elem_offset = "the set's id, low half" } },
}

-- Opcodes whose status names a state array (docs/protocol.md, "Optimizer state"), and those arrays.
local STATE_OPCODES = { pull = true, init = true, result = true }
local STATE_ARRAYS = { [0] = "weights (job dtype)", [1] = "master weights (fp32)", [2] = "first moment (fp32)",
                       [3] = "second moment (fp32)" }
-- Where the nonfinite and tail flags mean something, and what the tail holds.
local NONFINITE_OPCODES = { push = true, result = true, fwd_partial = true, fwd_result = true }
local TAIL_OPCODES = { push = true, fwd_partial = true, init = true, result = true }
local HPARAMS_FAMILIES = { [0] = "SGD", [1] = "Adam", [2] = "AdamW" }

-- Error status codes (status field of an error): name and what aux holds.
local STATUSES = {
  [0] = { name = "ok", aux = "0" },
  [1] = { name = "round_ahead", aux = "the server's current round of the chunk" },
  [2] = { name = "round_behind", aux = "the server's current round of the chunk" },
  [3] = { name = "round_stalled", aux = "a rank that has not contributed" },
  [4] = { name = "unknown_chunk", aux = "the job's number of chunks" },
  [5] = { name = "not_initialized", aux = "0" },
  [6] = { name = "epoch_mismatch", aux = "the job's epoch on this lcore" },
  [7] = { name = "bad_request", aux = "the expected elements per packet, dtype, owning lcore or round modulus" },
  [8] = { name = "draining", aux = "the chunk's current round" },
  [9] = { name = "hparams_unknown", aux = "0" },
  [10] = { name = "hparams_mismatch", aux = "0" },
  [11] = { name = "nonfinite", aux = "the index of the first NaN or Inf element of the push" },
}

local DTYPES = { [0] = { name = "fp32", bytes = 4 }, [1] = { name = "fp16", bytes = 2 }, [2] = { name = "bf16", bytes = 2 } }

local FLAGS = {
  { bit = 0x0001, abbrev = "crc", name = "crc", text = "crc32c holds the payload's CRC32C" },
  { bit = 0x0002, abbrev = "retransmit", name = "retransmit", text = "the sender resent this packet" },
  { bit = 0x0004, abbrev = "mean", name = "mean", text = "the result is a mean" },
  { bit = 0x0008, abbrev = "epoch_start", name = "epoch_start", text = "rank 0 starts the epoch in the epoch field" },
  { bit = 0x0010, abbrev = "fresh_weights", name = "fresh_weights", text = "with epoch_start in a ps job: forget the weights" },
  { bit = 0x0020, abbrev = "mac", name = "mac", text = "crc32c and aux hold the session payload MAC" },
  { bit = 0x0040, abbrev = "nonfinite", name = "nonfinite", text = "ps: the step is declared non-finite (push, partial), or the round was skipped (result)" },
  { bit = 0x0080, abbrev = "tail", name = "tail", text = "the payload ends with a u64: the round's hyperparameter set id, or a state array's step count" },
  { bit = 0x0100, abbrev = "follows_map", name = "follows_map", text = "join: the sender follows the chunk-to-interface map (the lcore the join reaches may redirect it)" },
}
local FLAGS_KNOWN = 0x01ff
local FLAG_NONFINITE, FLAG_TAIL, FLAG_FOLLOWS_MAP = 0x0040, 0x0080, 0x0100
local FLAG_CRC, FLAG_MAC = 0x0001, 0x0020

local JOINED_OPTIONS = { session = 0x01, payload_mac = 0x02, confirmed = 0x04, redirect = 0x08, known = 0x0f }
local HUB_STATE_FRESH_WEIGHTS, HUB_STATE_FLAGS_KNOWN = 0x1, 0x1
local FINGERPRINT_PARTS = { "racks", "ranks", "layout", "arithmetic", "optimizer" }

local function names_of(t)
  local out = {}
  for k, v in pairs(t) do out[k] = v.name end
  return out
end

-- Fields ------------------------------------------------------------------------------------------------
local f = phub.fields
local F = {
  magic = ProtoField.uint16("phub.magic", "Magic", base.HEX),
  version = ProtoField.uint8("phub.version", "Version"),
  opcode = ProtoField.uint8("phub.opcode", "Opcode", base.DEC, names_of(OPCODES)),
  flags = ProtoField.uint16("phub.flags", "Flags", base.HEX),
  dtype = ProtoField.uint8("phub.dtype", "Dtype", base.DEC, names_of(DTYPES)),
  status = ProtoField.uint8("phub.status", "Status", base.DEC, names_of(STATUSES)),
  job_id = ProtoField.uint32("phub.job_id", "Job id"),
  rank = ProtoField.uint16("phub.rank", "Rank"),
  payload_bytes = ProtoField.uint16("phub.payload_bytes", "Payload bytes"),
  round = ProtoField.uint32("phub.round", "Round"),
  chunk_id = ProtoField.uint32("phub.chunk_id", "Chunk id"),
  elem_offset = ProtoField.uint32("phub.elem_offset", "Element offset"),
  elem_count = ProtoField.uint16("phub.elem_count", "Element count"),
  epoch = ProtoField.uint16("phub.epoch", "Epoch"),
  crc32c = ProtoField.uint32("phub.crc32c", "crc32c field", base.HEX),
  aux = ProtoField.uint32("phub.aux", "aux field", base.HEX),
  auth_tag = ProtoField.uint64("phub.auth_tag", "Auth tag", base.HEX),
  seq = ProtoField.uint32("phub.seq", "Sequence number"),
  reserved = ProtoField.uint16("phub.reserved", "Reserved", base.HEX),
  -- what crc32c and aux mean for this opcode and these flags
  payload_crc = ProtoField.uint32("phub.payload_crc", "Payload CRC32C", base.HEX),
  crc_ok = ProtoField.bool("phub.crc_ok", "Payload CRC32C correct"),
  cookie = ProtoField.uint32("phub.cookie", "Address cookie", base.HEX),
  incarnation = ProtoField.uint32("phub.incarnation", "Incarnation", base.HEX),
  error_detail = ProtoField.uint32("phub.error_detail", "Error detail"),
  payload_mac = ProtoField.uint64("phub.payload_mac", "Session payload MAC", base.HEX),
  hub_mac = ProtoField.uint64("phub.hub_mac", "Forward payload MAC", base.HEX),
  probe_nonce = ProtoField.uint32("phub.probe_nonce", "Prober's nonce", base.HEX),
  session = ProtoField.bool("phub.session", "Session packet"),
  session_from = ProtoField.framenum("phub.session_joined", "Job's sessions learnt from the joined in frame"),
  -- payloads
  elements = ProtoField.bytes("phub.elements", "Elements"),
  element = ProtoField.float("phub.element", "Element"),
  hs_version = ProtoField.uint8("phub.handshake.version", "Handshake version"),
  hs_options = ProtoField.uint8("phub.handshake.options", "Options", base.HEX),
  hs_session = ProtoField.bool("phub.handshake.session", "session", 8, nil, JOINED_OPTIONS.session),
  hs_payload_mac = ProtoField.bool("phub.handshake.payload_mac", "payload_mac", 8, nil, JOINED_OPTIONS.payload_mac),
  hs_confirmed = ProtoField.bool("phub.handshake.confirmed", "confirmed (answers a confirm the server took)", 8, nil,
                                 JOINED_OPTIONS.confirmed),
  hs_redirect = ProtoField.bool("phub.handshake.redirect", "redirect (join the lcore at the chunk_id address)", 8, nil,
                                JOINED_OPTIONS.redirect),
  challenge = ProtoField.bytes("phub.handshake.challenge", "Server's challenge (a confirm)"),
  hs_reserved = ProtoField.bytes("phub.handshake.reserved", "Reserved"),
  worker_nonce = ProtoField.bytes("phub.handshake.worker_nonce", "Worker nonce"),
  server_nonce = ProtoField.bytes("phub.handshake.server_nonce", "Server nonce"),
  reply_ipv4 = ProtoField.ipv4("phub.handshake.reply_ipv4", "Reply IPv4 address"),
  reply_port = ProtoField.uint16("phub.handshake.reply_port", "Reply UDP port"),
  hs_padding = ProtoField.bytes("phub.handshake.padding", "Padding"),
  hub_fingerprint = ProtoField.uint64("phub.hub_state.fingerprint", "Fingerprint", base.HEX),
  hub_nonce = ProtoField.uint32("phub.hub_state.nonce", "Nonce", base.HEX),
  hub_echo = ProtoField.uint32("phub.hub_state.echo", "Echo", base.HEX),
  hub_rank0_holder = ProtoField.uint32("phub.hub_state.rank0_holder", "Rank 0 holder", base.HEX),
  hub_first_round = ProtoField.uint32("phub.hub_state.first_round", "First round"),
  hub_flags = ProtoField.uint32("phub.hub_state.flags", "Flags", base.HEX),
  hub_fresh = ProtoField.bool("phub.hub_state.fresh_weights", "fresh_weights", 32, nil, HUB_STATE_FRESH_WEIGHTS),
  hub_reserved = ProtoField.uint32("phub.hub_state.reserved", "Reserved", base.HEX),
  hub_life = ProtoField.uint64("phub.hub_state.life", "Life (ns of the sender's realtime clock when its nonce was drawn)"),
  probe_stamp = ProtoField.uint64("phub.probe.stamp", "Send stamp"),
  probe_body_nonce = ProtoField.uint64("phub.probe.nonce", "Nonce", base.HEX),
  probe_turnaround = ProtoField.uint64("phub.probe.turnaround_ns", "Turnaround (ns)"),
  probe_rest = ProtoField.bytes("phub.probe.rest", "Rest of the body"),
  state_array = ProtoField.uint8("phub.state_array", "State array", base.DEC, STATE_ARRAYS),
  tail_id = ProtoField.uint64("phub.hparams.id", "Hyperparameter set id", base.HEX),
  tail_step = ProtoField.uint64("phub.state.step", "Optimizer step count"),
  hp_version = ProtoField.uint8("phub.hparams.version", "Version"),
  hp_family = ProtoField.uint8("phub.hparams.family", "Optimizer", base.DEC, HPARAMS_FAMILIES),
  hp_flags = ProtoField.uint8("phub.hparams.flags", "Flags", base.HEX),
  hp_nesterov = ProtoField.bool("phub.hparams.nesterov", "nesterov", 8, nil, 0x01),
  hp_reserved = ProtoField.bytes("phub.hparams.reserved", "Reserved"),
  hp_lr = ProtoField.double("phub.hparams.lr", "lr"),
  hp_momentum = ProtoField.double("phub.hparams.momentum", "momentum"),
  hp_beta1 = ProtoField.double("phub.hparams.beta1", "beta1"),
  hp_beta2 = ProtoField.double("phub.hparams.beta2", "beta2"),
  hp_eps = ProtoField.double("phub.hparams.eps", "eps"),
  hp_weight_decay = ProtoField.double("phub.hparams.weight_decay", "weight_decay"),
}
for _, fl in ipairs(FLAGS) do
  F["flag_" .. fl.abbrev] = ProtoField.bool("phub.flags." .. fl.abbrev, fl.name, 16, nil, fl.bit, fl.text)
end
F.flag_unknown = ProtoField.uint16("phub.flags.unknown", "Unknown bits", base.HEX, nil, bit32.band(0xffff, bit32.bnot(FLAGS_KNOWN)))
for _, v in pairs(F) do f[#f + 1] = v end

-- Expert items: everything docs/protocol.md says a receiver rejects ------------------------------------------
local EXPERTS = {  -- key = { abbrev suffix, text, group, severity }
  short = { "malformed.short", "Shorter than the 54-byte phub header", expert.group.MALFORMED, expert.severity.ERROR },
  magic = { "malformed.magic", "Bad magic (bad_magic)", expert.group.MALFORMED, expert.severity.ERROR },
  version = { "malformed.version", "Unsupported protocol version (bad_version)", expert.group.MALFORMED, expert.severity.ERROR },
  opcode = { "malformed.opcode", "Unknown opcode (bad_opcode)", expert.group.MALFORMED, expert.severity.ERROR },
  flags = { "malformed.flags", "Unknown flag bits (bad_flags)", expert.group.MALFORMED, expert.severity.ERROR },
  flag_combo = { "malformed.flag_combination", "Flags not allowed together or on this opcode", expert.group.MALFORMED, expert.severity.ERROR },
  dtype = { "malformed.dtype", "Unknown dtype (bad_dtype)", expert.group.MALFORMED, expert.severity.ERROR },
  status = { "malformed.status", "Status out of range, or nonzero outside an error (bad_status)", expert.group.MALFORMED, expert.severity.ERROR },
  reserved = { "malformed.reserved", "Reserved field not 0 (reserved_nonzero)", expert.group.MALFORMED, expert.severity.ERROR },
  length = { "malformed.payload_length", "payload_bytes differs from the datagram (payload_length_mismatch)", expert.group.MALFORMED, expert.severity.ERROR },
  elems = { "malformed.elem_count", "elem_count x dtype size differs from payload_bytes (elem_count_mismatch)", expert.group.MALFORMED, expert.severity.ERROR },
  unexpected = { "malformed.unexpected_payload", "A payload on an opcode that carries none (unexpected_payload)", expert.group.MALFORMED, expert.severity.ERROR },
  crc = { "malformed.crc", "Payload CRC32C wrong (bad_crc)", expert.group.CHECKSUM, expert.severity.ERROR },
  forward = { "malformed.forward", "Hub opcode with the crc flag, or a fwd_partial not in fp32 (bad_forward)", expert.group.MALFORMED, expert.severity.ERROR },
  handshake = { "malformed.handshake", "Handshake payload not in its form", expert.group.MALFORMED, expert.severity.ERROR },
  hub_state = { "malformed.hub_state", "hub_state payload not in its form (bad_hub_state)", expert.group.MALFORMED, expert.severity.ERROR },
  hparams = { "malformed.hparams", "Hyperparameter set not in its form", expert.group.MALFORMED, expert.severity.ERROR },
  probe = { "malformed.probe", "Probe body shorter than 24 bytes", expert.group.MALFORMED, expert.severity.ERROR },
  retransmit = { "retransmit", "Sent again by its sender", expert.group.SEQUENCE, expert.severity.NOTE },
  error_msg = { "error", "phub error answer", expert.group.RESPONSE_CODE, expert.severity.NOTE },
}
local E = {}
phub.experts = {}
for key, e in pairs(EXPERTS) do
  E[key] = ProtoExpert.new("phub." .. e[1], e[2], e[3], e[4])
  phub.experts[#phub.experts + 1] = E[key]
end

-- Adds expert item `key` under `item`, its text followed by `detail` if given.
local function complain(item, key, detail)
  local text = EXPERTS[key][2]
  item:add_proto_expert_info(E[key], detail and (text .. ": " .. detail) or text)
end

-- Preferences --------------------------------------------------------------------------------------------
phub.prefs.ports = Pref.range("UDP ports", "", "UDP ports always dissected as phub (e.g. 42100-42163)", 65535)
phub.prefs.verify_crc = Pref.bool("Verify payload CRC32C", true, "Check the CRC32C of payloads that carry the crc flag")
phub.prefs.elements_shown = Pref.uint("fp32 elements shown", 4, "How many leading fp32 elements each payload shows")

-- CRC32C (Castagnoli, reflected, init and final inversion), table-driven ---------------------------------------
local CRC_TABLE = {}
for i = 0, 255 do
  local c = i
  for _ = 1, 8 do
    if bit32.band(c, 1) ~= 0 then c = bit32.bxor(bit32.rshift(c, 1), 0x82F63B78) else c = bit32.rshift(c, 1) end
  end
  CRC_TABLE[i] = c
end
local function crc32c(range)
  local bytes = range:bytes()
  local c = 0xFFFFFFFF
  for i = 0, bytes:len() - 1 do
    c = bit32.bxor(CRC_TABLE[bit32.band(bit32.bxor(c, bytes:get_index(i)), 0xff)], bit32.rshift(c, 8))
  end
  return bit32.bnot(c)
end

-- Sessions: a job runs them when a joined of it says so (the options byte). Learnt per job id from the joined
-- frames of the capture; the frame number says where.
local session_jobs = {}
function phub.init() session_jobs = {} end

-- Payloads ------------------------------------------------------------------------------------------------
-- Each takes (tvb range of the payload, tree, pinfo, header) and adds its items; `h` has the header's fields.
local PAYLOADS = {}

PAYLOADS.none = function(r, tree, pinfo, h)
  if h.payload_bytes > 0 or r:len() > 0 then complain(tree, "unexpected", math.max(h.payload_bytes, r:len()) .. " bytes") end
end

PAYLOADS.elements = function(r, tree, pinfo, h)
  local d = DTYPES[h.dtype]
  if d == nil then return end
  local tail = bit32.band(h.flags, FLAG_TAIL) ~= 0 and 8 or 0
  if tail > 0 and r:len() >= 8 then
    -- After the elements: in a push or partial its round's hyperparameter set, in a state array the step count.
    local t = r:range(r:len() - 8, 8)
    if h.opcode == 1 or h.opcode == 4 then tree:add(F.tail_id, t) else tree:add(F.tail_step, t) end
    r = r:len() > 8 and r:range(0, r:len() - 8) or r:range(0, 0)
  end
  if h.elem_count * d.bytes + tail ~= h.payload_bytes then
    complain(tree, "elems", string.format("%d x %s is %d bytes, payload_bytes %d", h.elem_count, d.name,
                                          h.elem_count * d.bytes, h.payload_bytes))
  end
  if r:len() == 0 then return end
  local t = tree:add(F.elements, r)
  t:set_text(string.format("Elements: %d x %s (%d bytes, little-endian)", math.floor(r:len() / d.bytes), d.name,
                           r:len()))
  if d.name == "fp32" then
    for i = 0, math.min(phub.prefs.elements_shown, math.floor(r:len() / 4)) - 1 do
      t:add_le(F.element, r:range(i * 4, 4))
    end
  end
end

-- fwd_init: rank 0's init of one segment, or with elem_count 0 (and no payload) a request for the weights.
PAYLOADS.elements_or_none = function(r, tree, pinfo, h)
  if h.elem_count == 0 and r:len() == 0 then
    tree:add(r, "Request for the chunk's weights (no elements)")
    return
  end
  PAYLOADS.elements(r, tree, pinfo, h)
end

local function handshake_length_ok(r, tree, name)
  if r:len() ~= 44 then
    complain(tree, "handshake", string.format("a %s payload is 44 bytes, not %d", name, r:len()))
    return false
  end
  return true
end

local function must_be_zero(r, tree, field, what)
  local item = tree:add(field, r)
  for i = 0, r:len() - 1 do
    if r:range(i, 1):uint() ~= 0 then
      complain(item, "handshake", what .. " not 0")
      return
    end
  end
end

-- hparams, fwd_hparams: a hyperparameter set (56 bytes), or none in an acknowledgement.
PAYLOADS.hparams_or_none = function(r, tree, pinfo, h)
  if r:len() == 0 then
    tree:add(r, "Acknowledgement (no payload)")
    return
  end
  if r:len() ~= 56 then
    complain(tree, "hparams", string.format("a hyperparameter set is 56 bytes, not %d", r:len()))
    return
  end
  local t = tree:add(r, "Hyperparameter set")
  local v = t:add(F.hp_version, r:range(0, 1))
  if r:range(0, 1):uint() ~= 1 then complain(v, "hparams", "version is not 1") end
  local fam = t:add(F.hp_family, r:range(1, 1))
  if HPARAMS_FAMILIES[r:range(1, 1):uint()] == nil then complain(fam, "hparams", "unknown optimizer") end
  local fl = t:add(F.hp_flags, r:range(2, 1))
  fl:add(F.hp_nesterov, r:range(2, 1))
  if bit32.band(r:range(2, 1):uint(), 0xfe) ~= 0 then complain(fl, "hparams", "unknown flags") end
  must_be_zero(r:range(3, 5), t, F.hp_reserved, "reserved bytes")
  local names = { "hp_lr", "hp_momentum", "hp_beta1", "hp_beta2", "hp_eps", "hp_weight_decay" }
  for i, n in ipairs(names) do t:add(F[n], r:range(8 + (i - 1) * 8, 8)) end
end

PAYLOADS.join = function(r, tree, pinfo, h)
  if not handshake_length_ok(r, tree, "join") then return end
  local version = r:range(0, 1):uint()
  local t = tree:add(r, version == 2 and "Handshake (join: confirm)" or "Handshake (join)")
  local v = t:add(F.hs_version, r:range(0, 1))
  if version ~= 1 and version ~= 2 then complain(v, "handshake", "join version is not 1 (first) or 2 (confirm)") end
  must_be_zero(r:range(1, 3), t, F.hs_reserved, "reserved bytes")
  t:add(F.worker_nonce, r:range(4, 16))
  if version == 2 then
    local c = t:add(F.challenge, r:range(20, 16))
    if r:range(20, 16):bytes():tohex() == string.rep("00", 16) then complain(c, "handshake", "a confirm's challenge is 0") end
  else
    must_be_zero(r:range(20, 16), t, F.hs_padding, "padding")
  end
  must_be_zero(r:range(36, 8), t, F.hs_padding, "padding")
end

PAYLOADS.joined = function(r, tree, pinfo, h)
  if not handshake_length_ok(r, tree, "joined") then return end
  local t = tree:add(r, "Handshake (joined)")
  local v = t:add(F.hs_version, r:range(0, 1))
  if r:range(0, 1):uint() ~= 1 then complain(v, "handshake", "handshake version is not 1") end
  local options = r:range(1, 1):uint()
  local o = t:add(F.hs_options, r:range(1, 1))
  o:add(F.hs_session, r:range(1, 1))
  o:add(F.hs_payload_mac, r:range(1, 1))
  o:add(F.hs_confirmed, r:range(1, 1))
  o:add(F.hs_redirect, r:range(1, 1))
  local redirect = bit32.band(options, JOINED_OPTIONS.redirect) ~= 0
  if bit32.band(options, bit32.bnot(JOINED_OPTIONS.known)) ~= 0 or
      (bit32.band(options, JOINED_OPTIONS.payload_mac) ~= 0 and bit32.band(options, JOINED_OPTIONS.session) == 0) or
      (redirect and options ~= JOINED_OPTIONS.redirect) then
    complain(o, "handshake", "unknown options, payload_mac without session, or redirect with another option")
  end
  must_be_zero(r:range(2, 2), t, F.hs_reserved, "reserved bytes")
  t:add(F.worker_nonce, r:range(4, 16))
  local sn = t:add(F.server_nonce, r:range(20, 16))
  if (r:range(20, 16):bytes():tohex() == string.rep("00", 16)) ~= redirect then
    complain(sn, "handshake", "the server nonce is 0 exactly in a redirect")
  end
  t:add(F.reply_ipv4, r:range(36, 4))
  t:add(F.reply_port, r:range(40, 2))
  must_be_zero(r:range(42, 2), t, F.hs_reserved, "reserved bytes")
  if bit32.band(options, JOINED_OPTIONS.session) ~= 0 and not pinfo.visited then
    local seen = session_jobs[h.job_id]
    if seen == nil or pinfo.number < seen then session_jobs[h.job_id] = pinfo.number end
  end
end

PAYLOADS.hub_state = function(r, tree, pinfo, h)
  if r:len() ~= 72 then
    complain(tree, "hub_state", string.format("a hub_state payload is 72 bytes, not %d", r:len()))
    return
  end
  local t = tree:add(r, "Hub state")
  for i, part in ipairs(FINGERPRINT_PARTS) do
    t:add(F.hub_fingerprint, r:range((i - 1) * 8, 8)):prepend_text(part .. " ")
  end
  local nonce = t:add(F.hub_nonce, r:range(40, 4))
  if r:range(40, 4):uint() == 0 then complain(nonce, "hub_state", "nonce 0") end
  t:add(F.hub_echo, r:range(44, 4))
  t:add(F.hub_rank0_holder, r:range(48, 4))
  t:add(F.hub_first_round, r:range(52, 4))
  local fl = t:add(F.hub_flags, r:range(56, 4))
  fl:add(F.hub_fresh, r:range(56, 4))
  if bit32.band(r:range(56, 4):uint(), bit32.bnot(HUB_STATE_FLAGS_KNOWN)) ~= 0 then
    complain(fl, "hub_state", "unknown flags")
  end
  local res = t:add(F.hub_reserved, r:range(60, 4))
  if r:range(60, 4):uint() ~= 0 then complain(res, "hub_state", "reserved not 0") end
  local life = t:add(F.hub_life, r:range(64, 8))
  if r:range(64, 8):uint64() == UInt64(0) then complain(life, "hub_state", "life 0") end
end

PAYLOADS.probe = function(r, tree, pinfo, h)
  if r:len() < 24 then
    complain(tree, "probe", string.format("%d bytes", r:len()))
    return
  end
  local t = tree:add(r, "Probe body")
  t:add(F.probe_stamp, r:range(0, 8))
  t:add(F.probe_body_nonce, r:range(8, 8))
  t:add(F.probe_turnaround, r:range(16, 8))
  if r:len() > 24 then t:add(F.probe_rest, r:range(24)) end
end

-- The header ----------------------------------------------------------------------------------------------
local function add_crc_and_aux(tvb, tree, h, op, payload)
  local crc_r, aux_r = tvb:range(32, 4), tvb:range(36, 4)
  local mac = bit32.band(h.flags, FLAG_MAC) ~= 0
  local crc_item = tree:add(F.crc32c, crc_r)
  local aux_item = tree:add(F.aux, aux_r)
  local both = tvb:range(32, 8)
  if op == nil then return end
  if op.crc == CRC_HUB_MAC then
    tree:add(F.hub_mac, both):set_generated()
  elseif mac then
    tree:add(F.payload_mac, both):set_generated()
  elseif op.crc == CRC_COOKIE then
    crc_item:add(F.cookie, crc_r)
  elseif bit32.band(h.flags, FLAG_CRC) ~= 0 then
    crc_item:add(F.payload_crc, crc_r)
    if phub.prefs.verify_crc and not h.truncated then  -- a payload cut by the capture cannot be checked
      local ok = crc32c(payload) == crc_r:uint()
      local item = crc_item:add(F.crc_ok, ok):set_generated()
      if not ok then complain(item, "crc", string.format("computed 0x%08x", crc32c(payload))) end
    end
  end
  if mac or op.aux == AUX_HUB_MAC then return end
  if op.aux == AUX_COOKIE then
    aux_item:add(F.cookie, aux_r)
  elseif op.aux == AUX_INCARNATION then
    aux_item:add(F.incarnation, aux_r)
  elseif op.aux == AUX_ERROR then
    aux_item:add(F.error_detail, aux_r)
    local st = STATUSES[h.status]
    if st ~= nil then aux_item:append_text(" (" .. st.aux .. ")") end
  elseif op.aux == AUX_NONCE then
    aux_item:add(F.probe_nonce, aux_r)
  end
end

local function header_fields(tvb)
  local h = {}
  h.magic = tvb:range(0, 2):uint()
  h.version = tvb:range(2, 1):uint()
  h.opcode = tvb:range(3, 1):uint()
  h.flags = tvb:range(4, 2):uint()
  h.dtype = tvb:range(6, 1):uint()
  h.status = tvb:range(7, 1):uint()
  h.job_id = tvb:range(8, 4):uint()
  h.rank = tvb:range(12, 2):uint()
  h.payload_bytes = tvb:range(14, 2):uint()
  h.round = tvb:range(16, 4):uint()
  h.chunk_id = tvb:range(20, 4):uint()
  h.elem_offset = tvb:range(24, 4):uint()
  h.elem_count = tvb:range(28, 2):uint()
  h.epoch = tvb:range(30, 2):uint()
  h.reserved = tvb:range(52, 2):uint()
  return h
end

local function dissect(tvb, pinfo, root)
  pinfo.cols.protocol = "phub"
  local tree = root:add(phub, tvb(), "phub")
  if tvb:len() < HEADER_BYTES and tvb:reported_len() >= HEADER_BYTES then
    tree:add(tvb(), "Header cut short by the capture (snaplen)")
    pinfo.cols.info = "phub: header cut short by the capture"
    return tvb:len()
  end
  if tvb:len() < HEADER_BYTES then
    complain(tree, "short", string.format("%d bytes", tvb:len()))
    pinfo.cols.info = "phub: malformed (" .. tvb:len() .. " bytes, shorter than the header)"
    return tvb:len()
  end
  local h = header_fields(tvb)
  local op = OPCODES[h.opcode]
  local name = op and op.name or ("unknown opcode " .. h.opcode)
  tree:append_text(", " .. name)

  local m = tree:add(F.magic, tvb:range(0, 2))
  if h.magic ~= MAGIC then complain(m, "magic") end
  local v = tree:add(F.version, tvb:range(2, 1))
  if h.version ~= VERSION then complain(v, "version", "version " .. h.version .. ", this dissector reads 3") end
  local o = tree:add(F.opcode, tvb:range(3, 1))
  if op ~= nil then o:append_text(" (" .. op.dir .. ")") else complain(o, "opcode") end

  local fl = tree:add(F.flags, tvb:range(4, 2))
  for _, b in ipairs(FLAGS) do fl:add(F["flag_" .. b.abbrev], tvb:range(4, 2)) end
  if bit32.band(h.flags, bit32.bnot(FLAGS_KNOWN)) ~= 0 then
    fl:add(F.flag_unknown, tvb:range(4, 2))
    complain(fl, "flags")
  end
  if bit32.band(h.flags, FLAG_CRC) ~= 0 and bit32.band(h.flags, FLAG_MAC) ~= 0 then
    complain(fl, "flag_combo", "mac with crc")
  end
  if op ~= nil and op.hub and bit32.band(h.flags, FLAG_MAC) ~= 0 then
    complain(fl, "flag_combo", "mac on a hub opcode")
  end
  if op ~= nil and op.hub and bit32.band(h.flags, FLAG_CRC) ~= 0 then complain(fl, "forward", "crc flag") end
  if bit32.band(h.flags, 0x0002) ~= 0 then complain(fl, "retransmit") end

  local dt = tree:add(F.dtype, tvb:range(6, 1))
  if DTYPES[h.dtype] == nil then complain(dt, "dtype") end
  if op ~= nil and op.name == "fwd_partial" and h.dtype ~= 0 then complain(dt, "forward", "fwd_partial not fp32") end
  if op ~= nil and bit32.band(h.flags, FLAG_NONFINITE) ~= 0 and not NONFINITE_OPCODES[op.name] then
    complain(fl, "flag_combo", "nonfinite on " .. op.name)
  end
  if op ~= nil and bit32.band(h.flags, FLAG_TAIL) ~= 0 and not TAIL_OPCODES[op.name] then
    complain(fl, "flag_combo", "tail on " .. op.name)
  end
  if op ~= nil and bit32.band(h.flags, FLAG_FOLLOWS_MAP) ~= 0 and op.name ~= "join" then
    complain(fl, "flag_combo", "follows_map on " .. op.name)
  end
  local st
  if op ~= nil and STATE_OPCODES[op.name] then
    st = tree:add(F.state_array, tvb:range(7, 1))
    if STATE_ARRAYS[h.status] == nil then complain(st, "status") end
  else
    st = tree:add(F.status, tvb:range(7, 1))
    if STATUSES[h.status] == nil or (h.status ~= 0 and (op == nil or op.name ~= "error")) then
      complain(st, "status")
    end
  end
  if op ~= nil and op.name == "error" then complain(st, "error_msg", (STATUSES[h.status] or { name = "?" }).name) end

  local notes = op and op.notes or {}
  local function noted(item, key)
    if notes[key] ~= nil then item:append_text(" (" .. notes[key] .. ")") end
  end
  tree:add(F.job_id, tvb:range(8, 4))
  noted(tree:add(F.rank, tvb:range(12, 2)), "rank")
  local pb = tree:add(F.payload_bytes, tvb:range(14, 2))
  local real = tvb:reported_len() - HEADER_BYTES  -- the datagram's; a capture may hold less of it (snaplen)
  local captured = tvb:len() - HEADER_BYTES
  if h.payload_bytes ~= real then
    complain(pb, "length", string.format("payload_bytes %d, the datagram carries %d", h.payload_bytes, real))
  end
  noted(tree:add(F.round, tvb:range(16, 4)), "round")
  noted(tree:add(F.chunk_id, tvb:range(20, 4)), "chunk_id")
  noted(tree:add(F.elem_offset, tvb:range(24, 4)), "elem_offset")
  tree:add(F.elem_count, tvb:range(28, 2))
  noted(tree:add(F.epoch, tvb:range(30, 2)), "epoch")
  local payload = tvb:range(HEADER_BYTES, captured)  -- a zero-length range is fine
  h.truncated = captured < real
  add_crc_and_aux(tvb, tree, h, op, payload)
  tree:add(F.auth_tag, tvb:range(40, 8))
  tree:add(F.seq, tvb:range(48, 4))
  local rs = tree:add(F.reserved, tvb:range(52, 2))
  if h.reserved ~= 0 then complain(rs, "reserved") end

  local session_from = session_jobs[h.job_id]
  if op ~= nil and not op.hub and op.name ~= "join" and op.name ~= "joined" and session_from ~= nil and
      pinfo.number > session_from then
    tree:add(F.session, true):set_generated()
    tree:add(F.session_from, session_from):set_generated()
  end

  if h.truncated then
    tree:add(payload, string.format("Payload cut short by the capture (%d of %d bytes): not decoded", captured, real))
  elseif op ~= nil then
    PAYLOADS[op.payload](payload, tree, pinfo, h)
  elseif real > 0 then
    tree:add(payload, string.format("Payload of an unknown opcode (%d bytes)", real))
  end

  local info = string.format("%s job=%d rank=%d", name, h.job_id, h.rank)
  if op ~= nil and op.name == "error" then
    info = info .. " status=" .. (STATUSES[h.status] or { name = tostring(h.status) }).name
  end
  info = info .. string.format(" round=%d chunk=%d off=%d n=%d epoch=%d seq=%d", h.round, h.chunk_id,
                               h.elem_offset, h.elem_count, h.epoch, tvb:range(48, 4):uint())
  if bit32.band(h.flags, 0x0002) ~= 0 then info = info .. " [retransmit]" end
  pinfo.cols.info = info
  return tvb:len()
end

function phub.dissector(tvb, pinfo, root)
  return dissect(tvb, pinfo, root)
end

-- A UDP datagram that starts with the magic is phub's.
local function heuristic(tvb, pinfo, root)
  if tvb:len() < 2 or tvb:range(0, 2):uint() ~= MAGIC then return false end
  dissect(tvb, pinfo, root)
  return true
end

local udp_port = DissectorTable.get("udp.port")
udp_port:add_for_decode_as(phub)
phub:register_heuristic("udp", heuristic)

local registered = nil
function phub.prefs_changed()
  if registered ~= nil then udp_port:remove(registered, phub) end
  registered = nil
  if phub.prefs.ports ~= nil and tostring(phub.prefs.ports) ~= "" then
    registered = phub.prefs.ports
    udp_port:add(registered, phub)
  end
end
