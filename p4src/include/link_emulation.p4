/* gradnet: per-port link emulation (egress): random loss, in every program.
 *
 * The machines gradnet runs on have no netem, so lossy links are emulated
 * in the switch: link_loss gives each egress port a drop threshold
 * t = round(p * 2^32) for loss probability p; a packet is dropped when a
 * uniform random 32-bit value is < t (t = 0: never; p = 1 is approximated
 * by t = 2^32 - 1). Emulated drops are counted per port. Every program
 * instantiates it as MyEgress.link_emulation, so controller/deploy.py's
 * LinkEmulation drives them all by the same table, action and counter names.
 *
 * Delay is NOT done here. v1model has no way to hold a packet: the only
 * P4-level delay would be recirculating it until
 * egress_global_timestamp - ingress_global_timestamp exceeds the delay,
 * which burns a full pipeline pass per loop iteration, reorders and
 * starves other traffic, and makes the delay depend on load. Per-port
 * delay therefore belongs to the target's traffic manager (the embedded
 * target's egress queues); on real BMv2 links have no emulated delay.
 */
#ifndef _GRADNET_LINK_EMULATION_P4_
#define _GRADNET_LINK_EMULATION_P4_

#include "config.p4"

control LinkEmulation(inout standard_metadata_t standard_metadata) {

    counter(NUM_PORTS, CounterType.packets) link_emulation_drops;

    /* the port's threshold, and this packet's random draw (set by either action) */
    bit<32> loss_threshold;
    bit<32> loss_random;

    action set_loss_rate(bit<32> drop_threshold) {
        loss_threshold = drop_threshold;
        random(loss_random, 32w0, 32w0xFFFFFFFF);
    }

    action no_loss() {
        loss_threshold = 0;
        loss_random = 0;
    }

    table link_loss {
        key = { standard_metadata.egress_port: exact; }
        actions = { set_loss_rate; no_loss; }
        default_action = no_loss();
        size = PORT_TABLE_SIZE;
    }

    apply {
        link_loss.apply();
        if (loss_random < loss_threshold) {
            mark_to_drop(standard_metadata);
            link_emulation_drops.count((bit<32>)standard_metadata.egress_port);
        }
    }
}

#endif  /* _GRADNET_LINK_EMULATION_P4_ */
