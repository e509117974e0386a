/* Conformance + benchmark: register-heavy program.
 *
 * Every aggregation packet does 32 register read-add-writes, one per value
 * (SwitchML-style: one register array per value position, indexed by the
 * packet's slot), and carries the running sums back. This is the
 * "register-heavy" program of the benchmarks (BMv2 1.15 on a 2-vCPU box:
 * ~18k pps); the ports come from a one-table port-to-port forward.
 *
 * Exercises: register read / write on 32 arrays (register<bit<32>>),
 * index from a header field (out of range: BMv2 logs an error and reads 0
 * / ignores the write -- slots are masked here so that cannot happen),
 * a reset flag that writes 0, and an exact table on ingress_port.
 *
 * Packet: ethernet | ipv4 | udp (dst GRADNET_INA_UDP_PORT) | agg_t.
 *   agg.slot     register index (masked to NUM_SLOTS - 1)
 *   agg.reset    1: the slot is cleared (registers := 0, values := 0)
 *   agg.v00..v31 values to add; on output, the new register contents
 * Other packets are forwarded unchanged. Entries: port_forward 1 ->
 * set_egress_port(2), 2 -> set_egress_port(1). Sending the same packet
 * twice to slot 7 returns v, then 2v (mod 2^32); a reset returns 0s.
 * Registers are named agg_r00..agg_r31 (P4Info GIngress.agg_rNN).
 */
#include <core.p4>
#include <v1model.p4>
#include "config.p4"
#include "headers.p4"

#define NUM_SLOTS 1024

header agg_t {
    bit<32> slot;
    bit<8>  reset;
    bit<8>  _pad0;
    bit<16> _pad1;
    bit<32> v00; bit<32> v01; bit<32> v02; bit<32> v03;
    bit<32> v04; bit<32> v05; bit<32> v06; bit<32> v07;
    bit<32> v08; bit<32> v09; bit<32> v10; bit<32> v11;
    bit<32> v12; bit<32> v13; bit<32> v14; bit<32> v15;
    bit<32> v16; bit<32> v17; bit<32> v18; bit<32> v19;
    bit<32> v20; bit<32> v21; bit<32> v22; bit<32> v23;
    bit<32> v24; bit<32> v25; bit<32> v26; bit<32> v27;
    bit<32> v28; bit<32> v29; bit<32> v30; bit<32> v31;
}

struct g_headers_t {
    ethernet_t ethernet;
    ipv4_t     ipv4;
    udp_t      udp;
    agg_t      agg;
}

struct g_metadata_t {
    bit<32> slot;
}

parser GParser(packet_in packet, out g_headers_t hdr, inout g_metadata_t meta,
               inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }
    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        transition select(hdr.ipv4.ihl, hdr.ipv4.frag_offset, hdr.ipv4.protocol) {
            (5, 0, IP_PROTO_UDP): parse_udp;
            default: accept;
        }
    }
    state parse_udp {
        packet.extract(hdr.udp);
        transition select(hdr.udp.dst_port) {
            GRADNET_INA_UDP_PORT: parse_agg;
            default: accept;
        }
    }
    state parse_agg {
        packet.extract(hdr.agg);
        transition accept;
    }
}

control GVerifyChecksum(inout g_headers_t hdr, inout g_metadata_t meta) {
    apply { }
}

/* One register array per value position; AGG(NN) declares it and the
 * action that reads, adds (or clears) and writes it back. */
#define AGG_REGISTER(NN) register<bit<32>>(NUM_SLOTS) agg_r##NN;
#define AGG_STEP(NN)                                   \
    agg_r##NN.read(value, meta.slot);                  \
    value = clear ? 32w0 : value + hdr.agg.v##NN;      \
    agg_r##NN.write(meta.slot, value);                 \
    hdr.agg.v##NN = value;

control GIngress(inout g_headers_t hdr, inout g_metadata_t meta,
                 inout standard_metadata_t standard_metadata) {

    AGG_REGISTER(00) AGG_REGISTER(01) AGG_REGISTER(02) AGG_REGISTER(03)
    AGG_REGISTER(04) AGG_REGISTER(05) AGG_REGISTER(06) AGG_REGISTER(07)
    AGG_REGISTER(08) AGG_REGISTER(09) AGG_REGISTER(10) AGG_REGISTER(11)
    AGG_REGISTER(12) AGG_REGISTER(13) AGG_REGISTER(14) AGG_REGISTER(15)
    AGG_REGISTER(16) AGG_REGISTER(17) AGG_REGISTER(18) AGG_REGISTER(19)
    AGG_REGISTER(20) AGG_REGISTER(21) AGG_REGISTER(22) AGG_REGISTER(23)
    AGG_REGISTER(24) AGG_REGISTER(25) AGG_REGISTER(26) AGG_REGISTER(27)
    AGG_REGISTER(28) AGG_REGISTER(29) AGG_REGISTER(30) AGG_REGISTER(31)

    /* All 32 read-add-writes in one action: one table application per
     * packet, as a hardware pipeline would do them in parallel. */
    action aggregate() {
        bit<32> value;
        bool clear = hdr.agg.reset == 1;
        meta.slot = hdr.agg.slot & (NUM_SLOTS - 1);
        AGG_STEP(00) AGG_STEP(01) AGG_STEP(02) AGG_STEP(03)
        AGG_STEP(04) AGG_STEP(05) AGG_STEP(06) AGG_STEP(07)
        AGG_STEP(08) AGG_STEP(09) AGG_STEP(10) AGG_STEP(11)
        AGG_STEP(12) AGG_STEP(13) AGG_STEP(14) AGG_STEP(15)
        AGG_STEP(16) AGG_STEP(17) AGG_STEP(18) AGG_STEP(19)
        AGG_STEP(20) AGG_STEP(21) AGG_STEP(22) AGG_STEP(23)
        AGG_STEP(24) AGG_STEP(25) AGG_STEP(26) AGG_STEP(27)
        AGG_STEP(28) AGG_STEP(29) AGG_STEP(30) AGG_STEP(31)
    }

    action set_egress_port(port_t port) {
        standard_metadata.egress_spec = port;
    }
    action drop() {
        mark_to_drop(standard_metadata);
    }
    table port_forward {
        key = { standard_metadata.ingress_port: exact; }
        actions = { set_egress_port; drop; }
        default_action = drop();
        size = PORT_TABLE_SIZE;
    }

    apply {
        port_forward.apply();
        if (hdr.agg.isValid()) {
            aggregate();
            /* values changed: a zero UDP checksum means "none" in IPv4 */
            hdr.udp.checksum = 0;
        }
    }
}

control GEgress(inout g_headers_t hdr, inout g_metadata_t meta,
                inout standard_metadata_t standard_metadata) {
    apply { }
}

control GComputeChecksum(inout g_headers_t hdr, inout g_metadata_t meta) {
    apply { }
}

control GDeparser(packet_out packet, in g_headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.udp);
        packet.emit(hdr.agg);
    }
}

V1Switch(GParser(), GVerifyChecksum(), GIngress(), GEgress(),
         GComputeChecksum(), GDeparser()) main;
