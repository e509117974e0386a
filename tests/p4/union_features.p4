/* Conformance: header unions and header-union stacks.
 *
 * Packet: ethernet (0x88B6) | u_probe_t | per probe.sel:
 *   1: a_t          -> extracted into the union u (member a)
 *   2: b_t          -> u.b
 *   3: up to 3 elements of the union stack us, each an a_t (first byte 0x0A)
 *      or a b_t (first byte 0x0B), until another first byte; a 4th element
 *      is StackOutOfBounds
 * Ingress, by probe.op (after recording what the parser left in probe.before):
 *   1: u.b.setValid(), u.b.b = 0xB0B0B0B0 (a valid u.a becomes invalid)
 *   2: u.a.setInvalid()
 *   3: u.a.setValid(), u.a.a = 0xA0A0 (a valid u.b becomes invalid)
 *   4: us[1].b.setValid(), us[1].b.b = 0x11111111 (us[1].a becomes invalid)
 *   5: us.push_front(1)   6: us.pop_front(1)   7: us[0] = u
 * BMv2 1.15 (StackP4_16<HeaderUnion>) shifts a union stack with the same
 * element swaps as a header stack, but marking a union invalid does nothing
 * there: push_front(1) on 3 elements leaves old [2, 0, 1], pop_front(1) old
 * [1, 2, 0], validity included.
 * then probe.after = the same validity bits. Validity bits: bit 0 u.a, bit 1
 * u.b, bit 2 u.isValid(), bits 3..5 us[0..2].a, bits 6..7 us[0..1].b; probe.more
 * bit 0 us[2].b, bits 1..3 whether us[i] has a valid member (not us[i].isValid():
 * p4c 1.2.4 emits that as valid_union of a *header* "us[i]", a JSON that BMv2
 * refuses to load). probe.err: parser_error (0, 3).
 * Deparser: ethernet, probe, u (the valid member), us (each valid member).
 */
#include <core.p4>
#include <v1model.p4>
#include "headers.p4"

const bit<16> ETHERTYPE_PROBE = 0x88B6;

header u_probe_t {
    bit<8>  sel;
    bit<8>  op;
    bit<8>  before;
    bit<8>  before_more;
    bit<8>  after;
    bit<8>  after_more;
    bit<8>  err;
}

header a_t {
    bit<8>  kind;
    bit<16> a;
}

header b_t {
    bit<8>  kind;
    bit<32> b;
}

header_union ab_t {
    a_t a;
    b_t b;
}

struct u_headers_t {
    ethernet_t ethernet;
    u_probe_t  probe;
    ab_t       u;
    ab_t[3]    us;
}

struct u_metadata_t { }

parser UParser(packet_in packet, out u_headers_t hdr, inout u_metadata_t meta,
               inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_PROBE: parse_probe;
            default: accept;
        }
    }
    state parse_probe {
        packet.extract(hdr.probe);
        transition select(hdr.probe.sel) {
            1: parse_a;
            2: parse_b;
            3: parse_stack;
            default: accept;
        }
    }
    state parse_a {
        packet.extract(hdr.u.a);
        transition accept;
    }
    state parse_b {
        packet.extract(hdr.u.b);
        transition accept;
    }
    state parse_stack {
        transition select(packet.lookahead<bit<8>>()) {
            0x0A: stack_a;
            0x0B: stack_b;
            default: accept;
        }
    }
    state stack_a {
        packet.extract(hdr.us.next.a);
        transition parse_stack;
    }
    state stack_b {
        packet.extract(hdr.us.next.b);
        transition parse_stack;
    }
}

control UVerifyChecksum(inout u_headers_t hdr, inout u_metadata_t meta) {
    apply { }
}

control UIngress(inout u_headers_t hdr, inout u_metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    action record(out bit<8> bits, out bit<8> more) {
        bits = (hdr.u.a.isValid() ? 8w0x01 : 8w0)
             | (hdr.u.b.isValid() ? 8w0x02 : 8w0)
             | (hdr.u.isValid() ? 8w0x04 : 8w0)
             | (hdr.us[0].a.isValid() ? 8w0x08 : 8w0)
             | (hdr.us[1].a.isValid() ? 8w0x10 : 8w0)
             | (hdr.us[2].a.isValid() ? 8w0x20 : 8w0)
             | (hdr.us[0].b.isValid() ? 8w0x40 : 8w0)
             | (hdr.us[1].b.isValid() ? 8w0x80 : 8w0);
        more = (hdr.us[2].b.isValid() ? 8w0x01 : 8w0)
             | (hdr.us[0].a.isValid() || hdr.us[0].b.isValid() ? 8w0x02 : 8w0)
             | (hdr.us[1].a.isValid() || hdr.us[1].b.isValid() ? 8w0x04 : 8w0)
             | (hdr.us[2].a.isValid() || hdr.us[2].b.isValid() ? 8w0x08 : 8w0);
    }
    apply {
        if (!hdr.probe.isValid()) {
            mark_to_drop(standard_metadata);
            exit;
        }
        if (standard_metadata.parser_error == error.NoError) {
            hdr.probe.err = 0;
        } else if (standard_metadata.parser_error == error.StackOutOfBounds) {
            hdr.probe.err = 3;
        } else if (standard_metadata.parser_error == error.PacketTooShort) {
            hdr.probe.err = 1;
        } else {
            hdr.probe.err = 0xFF;
        }
        record(hdr.probe.before, hdr.probe.before_more);
        if (hdr.probe.op == 1) {
            hdr.u.b.setValid();
            hdr.u.b.kind = 0x0B;
            hdr.u.b.b = 0xB0B0B0B0;
        } else if (hdr.probe.op == 2) {
            hdr.u.a.setInvalid();
        } else if (hdr.probe.op == 3) {
            hdr.u.a.setValid();
            hdr.u.a.kind = 0x0A;
            hdr.u.a.a = 0xA0A0;
        } else if (hdr.probe.op == 4) {
            hdr.us[1].b.setValid();
            hdr.us[1].b.kind = 0x0B;
            hdr.us[1].b.b = 0x11111111;
        } else if (hdr.probe.op == 5) {
            hdr.us.push_front(1);
        } else if (hdr.probe.op == 6) {
            hdr.us.pop_front(1);
        } else if (hdr.probe.op == 7) {
            hdr.us[0] = hdr.u;
        }
        record(hdr.probe.after, hdr.probe.after_more);
        standard_metadata.egress_spec = standard_metadata.ingress_port;
    }
}

control UEgress(inout u_headers_t hdr, inout u_metadata_t meta,
                inout standard_metadata_t standard_metadata) {
    apply { }
}

control UComputeChecksum(inout u_headers_t hdr, inout u_metadata_t meta) {
    apply { }
}

control UDeparser(packet_out packet, in u_headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.probe);
        packet.emit(hdr.u);
        packet.emit(hdr.us);
    }
}

V1Switch(UParser(), UVerifyChecksum(), UIngress(), UEgress(), UComputeChecksum(), UDeparser()) main;
