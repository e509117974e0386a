/* gradnet: NDN forwarding with a persistent PIT (ndn, docs/ndn.md).
 *
 * NDN v0.3 Interest/Data directly over Ethernet (EtherType 0x8624).
 * ingress: packet-out from the controller (straight out, or back through the pipeline);
 *          parser bounds -> counted drops; a marker (/*insert*, /*unsubscribe*,
 *          /*distribute*) is taken off the name; name-prefix hashes; one FIB lookup;
 *          Interests: nonce check, subscription admission (guarded: a job's members
 *          only, controller-assigned slots), subscriptions (persistent PIT, in the data plane or
 *          punted to the controller), transient PIT (aggregate), then the FIB's port;
 *          distribute Data from the FIB's face toward the PS (upstream check): acks by
 *          the transient PIT, updates by the persistent PIT; other Data: transient PIT
 * egress:  emulated link loss, packet-in header
 */
#include <core.p4>
#include <v1model.p4>

#include "config.p4"
#include "ndn_headers.p4"
#include "ndn_parser.p4"
#include "ndn_name_hash.p4"
#include "ndn_fib.p4"
#include "ndn_nonce.p4"
#include "ndn_pit.p4"
#include "ndn_sub_admission.p4"
#include "ndn_persistent_pit.p4"
#include "ndn_drops.p4"
#include "link_emulation.p4"
#include "packet_io.p4"

control MyIngress(inout ndn_headers_t hdr,
                  inout ndn_metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    NdnNameHash() name_hash;
    NdnFib() fib;
    NdnNonce() nonce;
    TransientPit() pit;
    NdnSubAdmission() sub_admission;
    PersistentPit() persistent_pit;
    NdnDrops() drops;

    apply {
        meta.in_port = standard_metadata.ingress_port;
        bool straight_out = false;
        if (hdr.packet_out.isValid()) {
            if (hdr.packet_out._pad == NDN_OUT_VIA_PIPELINE) {
                /* the controller's subscription, sent on by the FIB as if from its face */
                meta.in_port = hdr.packet_out.egress_port;
                meta.via_controller = 1;
            } else {
                /* From the controller: send where it says, no lookup. */
                standard_metadata.egress_spec = hdr.packet_out.egress_port;
                meta.event = NDN_EV_PACKET_OUT;
                straight_out = true;
            }
            hdr.packet_out.setInvalid();
        }
        if (straight_out) {
            /* counted below */
        } else if (standard_metadata.parser_error != error.NoError) {
            meta.drop_reason = NDN_DROP_PARSER_ERROR;
        } else if (meta.parse_drop != 0) {
            meta.drop_reason = meta.parse_drop;
        } else if (!hdr.ndn_name.isValid()) {
            meta.drop_reason = NDN_DROP_NOT_NDN;
        } else {
            meta.is_interest = hdr.ndn_packet.type == NDN_TLV_INTEREST ? 1w1 : 1w0;
            if (meta.t0 == NDN_TLV_GENERIC_COMPONENT) {
                if (meta.is_interest == 1 && meta.l0 == 8 && meta.c0 == NDN_INSERT_MARKER) {
                    meta.insert = 1;
                } else if (meta.is_interest == 1 && meta.l0 == 13 && meta.c0 == NDN_UNSUBSCRIBE_MARKER) {
                    meta.unsubscribe = 1;
                } else if (meta.is_interest == 0 && meta.l0 == 12 && meta.c0 == NDN_DISTRIBUTE_MARKER) {
                    meta.distribute = 1;
                }
            }
            if (meta.insert == 1 || meta.unsubscribe == 1 || meta.distribute == 1) {
                /* the rest of the ingress sees the name after the marker: /PS/train/... */
                meta.marked = 1;
                meta.t0 = meta.t1; meta.l0 = meta.l1; meta.c0 = meta.c1;
                meta.t1 = meta.t2; meta.l1 = meta.l2; meta.c1 = meta.c2;
                meta.t2 = meta.t3; meta.l2 = meta.l3; meta.c2 = meta.c3;
                meta.t3 = meta.t4; meta.l3 = meta.l4; meta.c3 = meta.c4;
                meta.t4 = meta.t5; meta.l4 = meta.l5; meta.c4 = meta.c5;
                meta.t5 = 0; meta.l5 = 0; meta.c5 = 0;
                meta.depth = meta.depth - 1;
                /* /PS/train/GPU: a subscription's ack (the transient PIT's), longer: an update */
                meta.ack = meta.distribute == 1 && meta.depth == 3 ? 1w1 : 1w0;
            }
            name_hash.apply(hdr, meta, standard_metadata);
            fib.apply(hdr, meta, standard_metadata);
            if (meta.marked == 1 && meta.depth < 2) {
                meta.drop_reason = NDN_DROP_BAD_MARKER;
            } else if (meta.is_interest == 1) {
                if (meta.in_port < 1 || meta.in_port > NDN_PIT_PORTS) {
                    meta.drop_reason = NDN_DROP_PORT_RANGE;
                }
            } else if (meta.distribute == 1) {
                if (meta.next_hop == 0) {
                    meta.drop_reason = NDN_DROP_NO_ROUTE;
                } else if (meta.in_port != meta.next_hop) {
                    meta.drop_reason = NDN_DROP_NOT_UPSTREAM;
                }
            } else if (meta.next_hop != 0 && meta.in_port != meta.next_hop
                       && meta.via_controller == 0) {
                /* Any other Data only from the face its Interest went out of: the
                 * switch forwards an Interest only to the FIB's face for its name, so
                 * a Data from another port answers no Interest of this switch, whatever
                 * PIT entry is live (a host that guessed or saw the name). */
                meta.drop_reason = NDN_DROP_DATA_NOT_UPSTREAM;
            }
            nonce.apply(hdr, meta, standard_metadata);
            sub_admission.apply(hdr, meta, standard_metadata);
            persistent_pit.apply(hdr, meta, standard_metadata);
            pit.apply(hdr, meta, standard_metadata);
            if (meta.drop_reason != 0) {
                /* counted below */
            } else if (meta.punt == 1) {
                standard_metadata.egress_spec = CPU_PORT;
                meta.event = NDN_EV_PUNTED;
            } else if (meta.is_interest == 1) {
                if (meta.forward == 1 && meta.next_hop == 0) {
                    meta.drop_reason = NDN_DROP_NO_ROUTE;
                } else if (meta.forward == 1) {
                    standard_metadata.egress_spec = meta.next_hop;
                }
                if (meta.drop_reason != 0) {
                    /* counted below */
                } else if (meta.unsubscribe == 1) {
                    meta.event = NDN_EV_UNSUBSCRIBED;
                } else if (meta.insert == 1 && meta.via_controller == 0) {
                    meta.event = NDN_EV_SUBSCRIBED;
                } else if (meta.forward == 1) {
                    meta.event = NDN_EV_FORWARDED;
                } else {
                    meta.event = NDN_EV_AGGREGATED;
                }
                if (meta.forward == 0) {
                    mark_to_drop(standard_metadata);
                }
            } else if (meta.distribute == 1 && meta.ack == 0) {
                meta.event = NDN_EV_DISTRIBUTED;
            } else {
                meta.event = NDN_EV_PIT_HIT;
            }
        }
        drops.apply(hdr, meta, standard_metadata);
    }
}

control MyEgress(inout ndn_headers_t hdr,
                 inout ndn_metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    LinkEmulation() link_emulation;
    CpuPacketIn() cpu_packet_in;

    apply {
        link_emulation.apply(standard_metadata);
        cpu_packet_in.apply(hdr.packet_in, standard_metadata);
    }
}

V1Switch(NdnParser(),
         NdnVerifyChecksum(),
         MyIngress(),
         MyEgress(),
         NdnComputeChecksum(),
         NdnDeparser()) main;
