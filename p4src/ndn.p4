/* gradnet: NDN forwarding with a persistent PIT (technique 2, docs/ndn.md).
 *
 * NDN v0.3 Interest/Data directly over Ethernet (EtherType 0x8624).
 * ingress: packet-out from the controller; parser bounds -> counted drops;
 *          name-prefix hashes; insert Interest -> controller (persistent PIT),
 *          distribute Data from the FIB's face toward the PS (upstream check)
 *          -> persistent PIT multicast group; other Interests:
 *          transient PIT (aggregate) then FIB; other Data: transient PIT
 * egress:  emulated link loss, packet-in header
 */
#include <core.p4>
#include <v1model.p4>

#include "config.p4"
#include "ndn_headers.p4"
#include "ndn_parser.p4"
#include "ndn_name_hash.p4"
#include "ndn_fib.p4"
#include "ndn_pit.p4"
#include "ndn_persistent_pit.p4"
#include "ndn_drops.p4"
#include "ndn_link_emulation.p4"
#include "ndn_packet_io.p4"

control MyIngress(inout ndn_headers_t hdr,
                  inout ndn_metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    NdnNameHash() name_hash;
    NdnFib() fib;
    TransientPit() pit;
    PersistentPit() persistent_pit;
    NdnDrops() drops;

    apply {
        if (hdr.packet_out.isValid()) {
            /* From the controller: send where it says, no lookup. */
            standard_metadata.egress_spec = hdr.packet_out.egress_port;
            hdr.packet_out.setInvalid();
            meta.event = NDN_EV_PACKET_OUT;
        } else if (standard_metadata.parser_error != error.NoError) {
            meta.drop_reason = NDN_DROP_PARSER_ERROR;
        } else if (meta.parse_drop != 0) {
            meta.drop_reason = meta.parse_drop;
        } else if (!hdr.ndn_name.isValid()) {
            meta.drop_reason = NDN_DROP_NOT_NDN;
        } else {
            meta.is_interest = hdr.ndn_packet.type == NDN_TLV_INTEREST ? 1w1 : 1w0;
            bool marker_type = meta.t0 == NDN_TLV_GENERIC_COMPONENT;
            if (meta.is_interest == 1 && marker_type && meta.l0 == 8 && meta.c0 == NDN_INSERT_MARKER) {
                meta.insert = 1;
            }
            if (meta.is_interest == 0 && marker_type && meta.l0 == 12 && meta.c0 == NDN_DISTRIBUTE_MARKER) {
                meta.distribute = 1;
            }
            /* a distribute Data hashes the name after its marker: the FIB then names
             * the face toward the PS, the only one its Data may come in on */
            name_hash.apply(hdr, meta, standard_metadata);
            bool marked = meta.insert == 1 || meta.distribute == 1;
            if (meta.distribute == 1 && meta.depth >= 3) {
                meta.fib_lookup = 1;
            } else if (!marked) {
                pit.apply(hdr, meta, standard_metadata);
                if (meta.drop_reason == 0 && meta.is_interest == 1 && meta.forward == 1) {
                    meta.fib_lookup = 1;
                }
            }
            /* one FIB lookup, for a forwarded Interest or a distribute Data's upstream */
            if (meta.fib_lookup == 1) {
                fib.apply(hdr, meta, standard_metadata);
            }
            if (meta.drop_reason != 0) {
                /* counted below */
            } else if (marked) {
                persistent_pit.apply(hdr, meta, standard_metadata);
                if (meta.drop_reason == 0 && meta.insert == 1) {
                    meta.event = NDN_EV_PUNTED;
                } else if (meta.drop_reason == 0) {
                    meta.event = NDN_EV_DISTRIBUTED;
                }
            } else if (meta.is_interest == 0) {
                meta.event = NDN_EV_PIT_HIT;
            } else if (meta.forward == 1) {
                standard_metadata.egress_spec = meta.next_hop;
                meta.event = NDN_EV_FORWARDED;
            } else {
                mark_to_drop(standard_metadata);
                meta.event = NDN_EV_AGGREGATED;
            }
        }
        drops.apply(hdr, meta, standard_metadata);
    }
}

control MyEgress(inout ndn_headers_t hdr,
                 inout ndn_metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    NdnLinkEmulation() link_emulation;
    NdnPacketIn() cpu_packet_in;

    apply {
        link_emulation.apply(hdr, meta, standard_metadata);
        cpu_packet_in.apply(hdr, meta, standard_metadata);
    }
}

V1Switch(NdnParser(),
         NdnVerifyChecksum(),
         MyIngress(),
         MyEgress(),
         NdnComputeChecksum(),
         NdnDeparser()) main;
