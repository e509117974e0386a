/* gradnet: plain IPv4 forwarding, the data plane of the baselines
 * (parameter server, ring all-reduce, BCube over ordinary switches).
 *
 * ingress: source binding of host ports (source_guard.p4),
 *          controller packet-out, drop checks, LPM route / ECMP,
 *          TTL decrement, DSCP -> queue priority
 * egress:  multicast leaves to unicast, emulated link loss, per-port
 *          source MAC, packet-in header
 */
#include <core.p4>
#include <v1model.p4>

#include "config.p4"
#include "headers.p4"
#include "parsers.p4"
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
    SourceGuard() source_guard;
    Forwarding() forwarding;
    PriorityClassifier() priority_classifier;

    apply {
        source_guard.apply(hdr, meta, standard_metadata);
        forwarding.apply(hdr, meta, standard_metadata);
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
