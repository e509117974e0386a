/* gradnet: NDN subscription admission, who may subscribe under a job's prefix, and the
 * persistent PIT slot of each job (docs/trust.md, "NDN: subscription admission").
 *
 * Applied in ndn.p4 to every marked packet (insert and unsubscribe Interests, distribute
 * Data; not to acks, nor to what the controller sends back through the pipeline), before
 * the persistent PIT.
 *
 * Open (sub_guard_config default, guard 0; what a deployment that names no jobs gets):
 * anyone may subscribe, and the slot is the low NDN_SUB_BITS bits of h_2, the crc32 of
 * /PS/train, which anyone can compute: a host can plant an entry in a job's slot first.
 *
 * Guarded (guard 1, installed by the controller with its jobs): the slot of /PS/train is
 * what the controller wrote for it in ndn_sub_slots (exact name, not a hash: the
 * controller gives each job its own slot, so no name can aim at another job's). An
 * insert or unsubscribe Interest
 *   - under a prefix with no slot is refused (NDN_DROP_SUB_UNKNOWN_JOB);
 *   - from a host-facing port must come from a member: (port, /PS/train) in
 *     ndn_sub_members, installed on each GPU's first switch; else NDN_DROP_SUB_NOT_MEMBER;
 *   - from a switch-facing port (ndn_fabric_ports) was admitted where it entered.
 * So a host port can hold persistent PIT entries only for the jobs it is a member of:
 * at most one per such job, however many names it sends. A distribute Data under a
 * prefix with no slot only looks up the controller's table (ndn_persistent_pit.p4).
 */
#ifndef _GRADNET_NDN_SUB_ADMISSION_P4_
#define _GRADNET_NDN_SUB_ADMISSION_P4_

#include "ndn_headers.p4"

control NdnSubAdmission(inout ndn_headers_t hdr,
                        inout ndn_metadata_t meta,
                        inout standard_metadata_t standard_metadata) {

    bit<1> guard;

    action set_guard(bit<1> on) {
        guard = on;
    }

    /* Keyless: open (0) or guarded (1) subscriptions. */
    table sub_guard_config {
        actions = { set_guard; }
        default_action = set_guard(0);
    }

    action set_slot(bit<8> slot) {
        meta.sub_slot = slot;
    }

    /* A job's prefix /PS/train -> its persistent PIT slot on this switch. */
    table ndn_sub_slots {
        key = {
            meta.t0: exact;
            meta.l0: exact;
            meta.c0: exact;
            meta.t1: exact;
            meta.l1: exact;
            meta.c1: exact;
        }
        actions = { set_slot; NoAction; }
        default_action = NoAction();
        size = NDN_SUB_JOBS_SIZE;
    }

    action fabric_port() { }

    /* Switch-facing ports: a subscription arriving there was admitted upstream. */
    table ndn_fabric_ports {
        key = { meta.in_port: exact; }
        actions = { fabric_port; NoAction; }
        default_action = NoAction();
        size = NDN_PIT_PORTS;
    }

    action member() { }

    /* A job's GPU on the port it is attached to may subscribe under /PS/train. */
    table ndn_sub_members {
        key = {
            meta.in_port: exact;
            meta.t0: exact;
            meta.l0: exact;
            meta.c0: exact;
            meta.t1: exact;
            meta.l1: exact;
            meta.c1: exact;
        }
        actions = { member; NoAction; }
        default_action = NoAction();
        size = NDN_SUB_MEMBERS_SIZE;
    }

    apply {
        /* a controller's unsubscribe on a dead GPU's behalf (ndn_persistent_pit.p4) is
         * checked as if it came in on the GPU's port, which is what it claims */
        if (meta.drop_reason == 0 && meta.marked == 1 && meta.ack == 0
                && (meta.via_controller == 0 || meta.unsubscribe == 1)) {
            sub_guard_config.apply();
            meta.sub_slot = meta.h2[NDN_SUB_BITS - 1:0];
            if (guard == 1) {
                bool subscribe = meta.insert == 1 || meta.unsubscribe == 1;
                if (!ndn_sub_slots.apply().hit) {
                    meta.sub_no_slot = 1;
                    if (subscribe) {
                        meta.drop_reason = NDN_DROP_SUB_UNKNOWN_JOB;
                    }
                } else if (subscribe) {
                    if (!ndn_fabric_ports.apply().hit) {
                        if (!ndn_sub_members.apply().hit) {
                            meta.drop_reason = NDN_DROP_SUB_NOT_MEMBER;
                        }
                    }
                }
            }
        }
    }
}

#endif  /* _GRADNET_NDN_SUB_ADMISSION_P4_ */
