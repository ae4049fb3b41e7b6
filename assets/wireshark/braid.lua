-- Wireshark dissector for Braid, the multipath transport of the Braid video player.
--
-- Use: wireshark -X lua_script:assets/wireshark/braid.lua -r path-down.pcap
--      tshark -X lua_script:assets/wireshark/braid.lua -r path-down.pcap -Y braid
-- or copy this file into Wireshark's personal Lua plugins folder.
--
-- Packet layouts (one packet per UDP datagram), RFC 9000 §17's:
--   long  (Initial / Handshake): 0xC0 | type<<4 | 0x03 (type 0 Initial, 2 Handshake),
--                                version (4), 8, destination id (8), 8, source id (8;
--                                after a Retry the two differ), [Initial: token length
--                                (varint), token],
--                                Length (varint), packet number (4, protected), AEAD
--                                payload; further packets may follow in the datagram
--   short (1-RTT):               0x40 | pn length - 1 (protected), destination connection
--                                id (8), packet number (1-4 bytes, protected), AEAD payload
-- A 1-RTT packet's path is the one its connection id was issued for (RFC 10069): the
-- header does not name it, and each path and direction uses ids of its own.
-- Every packet is protected (Initial packets with keys derived from the connection id,
-- the others with TLS secrets): header protection masks the low bits of the first byte
-- and the packet number, and the payload (frames + 16-byte tag) is AEAD-sealed. A Lua
-- dissector has no AEAD, so it shows the readable header and the protected rest: the
-- frames inside stay opaque.
--
-- Braid's captures (braid --pcap) use the server port 4433 and the client port 5000;
-- the dissector registers on both and as a UDP heuristic for other ports.

local braid = Proto("braid", "Braid multipath transport")

local VERSION = 0x00000001 -- QUIC version 1 (RFC 9000)
local CID_LEN = 8
local PN_LEN = 4 -- of long headers; the sample starts 4 bytes after any packet number
local TAG_LEN = 16
local SAMPLE_LEN = 16

local levels = { [0] = "Initial", [2] = "Handshake" }

local f_form = ProtoField.string("braid.header_form", "Header form")
local f_first = ProtoField.uint8("braid.first_byte", "First byte", base.HEX)
local f_level = ProtoField.string("braid.level", "Level")
local f_version = ProtoField.uint32("braid.version", "Version", base.HEX)
local f_cid = ProtoField.bytes("braid.cid", "Connection id")
local f_scid = ProtoField.bytes("braid.scid", "Source connection id")
local f_pn = ProtoField.bytes("braid.pn_protected", "Packet number (protected)")
local f_payload = ProtoField.bytes("braid.payload", "Protected payload")
local f_token = ProtoField.bytes("braid.token", "Token")
local f_length = ProtoField.uint32("braid.length", "Length (packet number + payload)")
local f_payload_len = ProtoField.uint32("braid.payload_length", "Payload length (frames + tag; and a short header's packet number)")

braid.fields = {
    f_form, f_first, f_level, f_version, f_cid, f_scid, f_token, f_length, f_pn, f_payload, f_payload_len
}

-- A QUIC variable-length integer at `off`: value (as a number), its length, or nil.
local function varint(tvb, off)
    if off >= tvb:len() then return nil end
    local b = tvb(off, 1):uint()
    local len = bit32.lshift(1, bit32.rshift(b, 6))
    if off + len > tvb:len() then return nil end
    local v = bit32.band(b, 0x3f)
    for i = 1, len - 1 do
        v = v * 256 + tvb(off + i, 1):uint()
    end
    return v, len
end

-- Parses the header; returns a table or nil when the datagram is not a Braid packet.
local function parse(tvb)
    local n = tvb:len()
    if n < 1 then return nil end
    local first = tvb(0, 1):uint()
    if bit32.band(first, 0x40) == 0 then return nil end
    local h = { first = first }
    if bit32.band(first, 0x80) ~= 0 then
        local level = bit32.band(bit32.rshift(first, 4), 0x03)
        if levels[level] == nil or n < 1 + 4 + 2 * (1 + CID_LEN) then return nil end
        if tvb(1, 4):uint() ~= VERSION then return nil end
        if tvb(5, 1):uint() ~= CID_LEN or tvb(6 + CID_LEN, 1):uint() ~= CID_LEN then
            return nil
        end
        h.long = true
        h.level = levels[level]
        h.cid_off = 6
        local off = 5 + 2 * (1 + CID_LEN)
        if level == 0 then
            local tlen, tl = varint(tvb, off)
            if tlen == nil or off + tl + tlen > n then return nil end
            h.token_off = off + tl
            h.token_len = tlen
            off = off + tl + tlen
        end
        local length, ll = varint(tvb, off)
        if length == nil then return nil end
        h.length_off = off
        h.length_len = ll
        h.length = length
        h.pn_off = off + ll
        if h.pn_off + length > n then return nil end
        n = h.pn_off + length
    else
        h.long = false
        h.level = "1-RTT"
        h.cid_off = 1
        h.pn_off = 1 + CID_LEN
    end
    if n < h.pn_off + PN_LEN + SAMPLE_LEN then return nil end
    if n - h.pn_off - PN_LEN < TAG_LEN then return nil end
    h.len = n
    return h
end

function braid.dissector(tvb, pinfo, tree)
    local h = parse(tvb)
    if h == nil then return 0 end
    pinfo.cols.protocol = "BRAID"
    local t = tree:add(braid, tvb(), "Braid, " .. h.level)
    t:add(f_form, tvb(0, 1), h.long and "long" or "short")
    t:add(f_first, tvb(0, 1))
    t:add(f_level, tvb(0, 1), h.level)
    if h.long then
        t:add(f_version, tvb(1, 4))
    end
    t:add(f_cid, tvb(h.cid_off, CID_LEN))
    if h.long then t:add(f_scid, tvb(h.cid_off + CID_LEN + 1, CID_LEN)) end
    local info = h.level .. " cid=" .. tostring(tvb(h.cid_off, CID_LEN):bytes())
    if h.token_off ~= nil and h.token_len > 0 then
        t:add(f_token, tvb(h.token_off, h.token_len))
        info = info .. " token"
    end
    if h.long then
        t:add(f_length, tvb(h.length_off, h.length_len), h.length)
    end
    -- Under header protection the packet number's length is not readable: a long
    -- header's is 4 bytes; a short header's field and payload are shown together.
    local pn_len = h.long and PN_LEN or 0
    if pn_len > 0 then
        t:add(f_pn, tvb(h.pn_off, pn_len))
    end
    local rest = h.len - h.pn_off - pn_len
    t:add(f_payload_len, tvb(h.pn_off + pn_len, rest), rest)
    t:add(f_payload, tvb(h.pn_off + pn_len, rest))
    if h.len < tvb:len() then
        info = info .. " +coalesced"
    end
    pinfo.cols.info = info .. " len=" .. tvb:len()
    return tvb:len()
end

-- Claims Braid datagrams on any UDP port: a long header must carry QUIC v1 and 8-byte ids, a
-- short one must have room for its id, a packet number, the sample and the tag.
local function heuristic(tvb, pinfo, tree)
    if parse(tvb) == nil then return false end
    braid.dissector(tvb, pinfo, tree)
    pinfo.conversation = braid
    return true
end

local udp = DissectorTable.get("udp.port")
udp:add(4433, braid)
udp:add(5000, braid)
braid:register_heuristic("udp", heuristic)
