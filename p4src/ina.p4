/* gradnet: in-network aggregation (ina, docs/ina.md).
 *
 * The program of the switches the placement chose, and of s_d (the PS's ToR
 * switch): forward.p4's forwarding plus register aggregators.
 *
 * ingress: SourceGuard (source binding of host ports, for packets that are
 *          not INA), InaAdmission (drops INA packets from hosts outside their
 *          job, docs/trust.md), Aggregator (may consume, redirect or multicast
 *          the packet), then the usual forwarding for whatever neither
 *          consumed
 * egress:  RESULT replicas rewritten per worker, emulated link loss,
 *          per-port source MAC, packet-in header
 */
#define GRADNET_WITH_INA
#include <core.p4>
#include <v1model.p4>

#include "config.p4"
#include "headers.p4"
#include "parsers.p4"
#include "ina_admission.p4"
#include "ina_aggregator.p4"
#include "source_guard.p4"
#include "forwarding.p4"
#include "priority.p4"
#include "ina_result_fanout.p4"
#include "port_macs.p4"
#include "link_emulation.p4"
#include "packet_io.p4"

control MyIngress(inout headers_t hdr,
                  inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    InaAdmission() admission;
    Aggregator() aggregator;
    SourceGuard() source_guard;
    Forwarding() forwarding;
    PriorityClassifier() priority_classifier;

    apply {
        /* Source binding for everything but INA packets, which admission binds to
         * their port and address itself (an aggregate the aggregator rewrites
         * carries the switch's address, and is INA). It only marks the packet;
         * forwarding drops and counts it. */
        if (!hdr.ina.isValid()) {
            source_guard.apply(hdr, meta, standard_metadata);
        }
        admission.apply(hdr, meta, standard_metadata);
        if (meta.ina.handled == 0) {
            aggregator.apply(hdr, meta, standard_metadata);
        }
        if (meta.ina.handled == 0) {
            forwarding.apply(hdr, meta, standard_metadata);
        }
        priority_classifier.apply(hdr, meta, standard_metadata);
    }
}

control MyEgress(inout headers_t hdr,
                 inout metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    ResultFanout() result_fanout;
    LinkEmulation() link_emulation;
    PortMacs() mac_rewrite;
    CpuPacketIn() cpu_packet_in;

    apply {
        result_fanout.apply(hdr, meta, standard_metadata);
        link_emulation.apply(standard_metadata);
        mac_rewrite.apply(hdr, meta, standard_metadata);
        cpu_packet_in.apply(hdr.packet_in, standard_metadata);
    }
}

V1Switch(GradnetParser(),
         GradnetVerifyChecksum(),
         MyIngress(),
         MyEgress(),
         GradnetComputeChecksum(),
         GradnetDeparser()) main;
