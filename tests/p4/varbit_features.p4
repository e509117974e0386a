/* Conformance: varbit fields (extract with a length, emit, checksums over
 * them) and the parser errors simple_switch raises for them.
 *
 * Packet: ethernet (0x88B6) | vb_t | opts_t (kind, then varbit<248> opts of
 *   vb.len bytes) | tail_t
 *   vb_t   = { bit<8> len; bit<8> mode; bit<16> csum; bit<8> min_size;
 *              bit<8> max_size; bit<8> err; bit<8> flags; bit<16> plen }
 *   tail_t = { bit<16> marker }
 * Parser: extract(vb); extract(opts, (bit<32>) vb.len * 8), except mode 1:
 *   length vb.len * 8 + 4 bits (not a multiple of 8: ParserInvalidArgument);
 *   then extract(tail). BMv2 checks, in order: length % 8 (ParserInvalidArgument),
 *   enough packet left (PacketTooShort), fixed part + length within the
 *   header's maximum of 32 bytes (HeaderTooShort).
 * Ingress: vb.err = parser_error (NoError 0, PacketTooShort 1, HeaderTooShort 4,
 *   ParserInvalidArgument 6); vb.min_size / max_size = opts_t's
 *   minSizeInBytes() / maxSizeInBytes(); vb.flags bit 0 = opts valid, bit 1 =
 *   tail valid; mode 2: opts.setInvalid() (not emitted); mode 3: tail
 *   setInvalid; mode 4: opts2.setValid(), opts2.kind = 0x77, opts2.opts =
 *   opts.opts (assign_VL: value and width); mode 5: opts.setInvalid() then
 *   setValid(): BMv2 zeroes the fields but keeps the varbit's width. Back out
 *   of the ingress port. Egress: vb.plen = packet_length (simple_switch's
 *   length register: the received length, minus / plus each header's bytes,
 *   varbit included, that setInvalid / setValid change).
 * Compute checksum: update_checksum(opts valid, {vb.len, vb.mode, opts.kind,
 *   opts.opts}, csum16)
 *   into vb.csum.
 * Deparser: ethernet, vb, opts (its extracted length), opts2, tail; the unparsed rest
 * stays payload.
 */
#include <core.p4>
#include <v1model.p4>
#include "headers.p4"

const bit<16> ETHERTYPE_PROBE = 0x88B6;

header vb_t {
    bit<8>  len;
    bit<8>  mode;
    bit<16> csum;
    bit<8>  min_size;
    bit<8>  max_size;
    bit<8>  err;
    bit<8>  flags;
    bit<16> plen;
}

header opts_t {
    bit<8>       kind;
    varbit<248>  opts;
}

header tail_t {
    bit<16> marker;
}

struct b_headers_t {
    ethernet_t ethernet;
    vb_t       vb;
    opts_t     opts;
    opts_t     opts2;
    tail_t     tail;
}

struct b_metadata_t { }

parser BParser(packet_in packet, out b_headers_t hdr, inout b_metadata_t meta,
               inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_PROBE: parse_vb;
            default: accept;
        }
    }
    state parse_vb {
        packet.extract(hdr.vb);
        transition select(hdr.vb.mode) {
            1: parse_opts_odd;
            default: parse_opts;
        }
    }
    state parse_opts {
        packet.extract(hdr.opts, (bit<32>)hdr.vb.len * 8);
        transition parse_tail;
    }
    state parse_opts_odd {
        packet.extract(hdr.opts, (bit<32>)hdr.vb.len * 8 + 4);
        transition parse_tail;
    }
    state parse_tail {
        packet.extract(hdr.tail);
        transition accept;
    }
}

control BVerifyChecksum(inout b_headers_t hdr, inout b_metadata_t meta) {
    apply { }
}

control BIngress(inout b_headers_t hdr, inout b_metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    apply {
        if (!hdr.vb.isValid()) {
            mark_to_drop(standard_metadata);
            exit;
        }
        if (standard_metadata.parser_error == error.NoError) {
            hdr.vb.err = 0;
        } else if (standard_metadata.parser_error == error.PacketTooShort) {
            hdr.vb.err = 1;
        } else if (standard_metadata.parser_error == error.HeaderTooShort) {
            hdr.vb.err = 4;
        } else if (standard_metadata.parser_error == error.ParserInvalidArgument) {
            hdr.vb.err = 6;
        } else {
            hdr.vb.err = 0xFF;
        }
        hdr.vb.min_size = (bit<8>)hdr.opts.minSizeInBytes();
        hdr.vb.max_size = (bit<8>)hdr.opts.maxSizeInBytes();
        hdr.vb.flags = (hdr.opts.isValid() ? 8w1 : 8w0) | (hdr.tail.isValid() ? 8w2 : 8w0);
        if (hdr.vb.mode == 4) {
            hdr.opts2.setValid();
            hdr.opts2.kind = 0x77;
            hdr.opts2.opts = hdr.opts.opts;
        }
        if (hdr.vb.mode == 5) {
            hdr.opts.setInvalid();
            hdr.opts.setValid();
        }
        if (hdr.vb.mode == 2) {
            hdr.opts.setInvalid();
        } else if (hdr.vb.mode == 3) {
            hdr.tail.setInvalid();
        }
        standard_metadata.egress_spec = standard_metadata.ingress_port;
    }
}

control BEgress(inout b_headers_t hdr, inout b_metadata_t meta,
                inout standard_metadata_t standard_metadata) {
    apply {
        hdr.vb.plen = (bit<16>)standard_metadata.packet_length;
    }
}

control BComputeChecksum(inout b_headers_t hdr, inout b_metadata_t meta) {
    apply {
        update_checksum(hdr.opts.isValid(),
                        { hdr.vb.len, hdr.vb.mode, hdr.opts.kind, hdr.opts.opts },
                        hdr.vb.csum, HashAlgorithm.csum16);
    }
}

control BDeparser(packet_out packet, in b_headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.vb);
        packet.emit(hdr.opts);
        packet.emit(hdr.opts2);
        packet.emit(hdr.tail);
    }
}

V1Switch(BParser(), BVerifyChecksum(), BIngress(), BEgress(), BComputeChecksum(), BDeparser()) main;
