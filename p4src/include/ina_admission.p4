/* gradnet: INA admission, who may send which INA packet into the fabric
 * (docs/trust.md, "INA: admission"; docs/ina.md).
 *
 * Applied in ina.p4 before the aggregator, on every switch that has hosts
 * attached (and every aggregating switch). The fabric trusts its switches
 * and the links between them: an INA packet arriving on a switch-facing port
 * (ina_fabric_ports, or the CPU port) was admitted at its first switch. On a
 * host-facing port:
 *   - a GRAD must come from a member of its job: (ingress port, source IP,
 *     job, rank) in ina_members, installed for every worker on its first
 *     switch; it must carry exactly the member's own bit and count 1 (a
 *     multi-contributor aggregate only ever comes from a switch);
 *   - a PARTIAL, RESULT or CLEAR must come from the job's PS: (ingress port,
 *     source IP, job) in ina_servers;
 *   - a NACK (loss recovery, header only) from the job's PS, or from a member
 *     asking for a RESULT with exactly its own bit in the bitmap;
 *   - anything else is no INA message.
 * On any port a GRAD with an empty bitmap or a zero count is refused: no
 * switch or worker ever sends one. Every refused packet is dropped and
 * counted by reason (ina_admission_drops); the aggregator never sees it.
 *
 * An admitted packet from a host leaves with the job's stamp (an action
 * parameter of its ina_members / ina_servers entry, drawn by the controller)
 * in worker_id, which nothing after admission reads; the UDP checksum is
 * updated incrementally (RFC 1624). The agents take only packets that carry
 * the stamp (hosts/ina/stamp.py): a datagram that reached them without
 * passing admission carries whatever its sender guessed.
 */
#ifndef _GRADNET_ADMISSION_P4_
#define _GRADNET_ADMISSION_P4_

#include "config.p4"
#include "headers.p4"

/* ina_admission_drops indices (controller/ina/admission.py names them) */
#define INA_ADMIT_EMPTY          1   /* GRAD with bitmap 0 or count 0 */
#define INA_ADMIT_HOST_AGGREGATE 2   /* several contributors, from a host port */
#define INA_ADMIT_NOT_MEMBER     3   /* GRAD: port, address, job or rank not a member */
#define INA_ADMIT_WRONG_BIT      4   /* a member's GRAD without exactly its own bit */
#define INA_ADMIT_NOT_SERVER     5   /* PARTIAL/RESULT/CLEAR from a host not the job's PS */
#define INA_ADMIT_BAD_TYPE       6   /* unknown msg_type from a host port */
#define INA_ADMIT_NACK           7   /* NACK from a host neither the PS nor a member */
#define INA_ADMIT_REASONS        8
#define INA_MEMBERS_SIZE      8192   /* workers of all jobs, on one switch */

control InaAdmission(inout headers_t hdr,
                     inout metadata_t meta,
                     inout standard_metadata_t standard_metadata) {

    counter(INA_ADMIT_REASONS, CounterType.packets) ina_admission_drops;

    bit<256> own_bit;
    bit<16> admit_stamp = 0;

    action fabric_port() { }

    /* Switch-facing ports: what arrives there was admitted upstream. */
    table ina_fabric_ports {
        key = { standard_metadata.ingress_port: exact; }
        actions = { fabric_port; NoAction; }
        default_action = NoAction();
        size = PORT_TABLE_SIZE;
    }

    action member(bit<256> bitmap, bit<16> stamp) {
        own_bit = bitmap;
        admit_stamp = stamp;
    }

    /* A job's worker on the port it is attached to: its GRADs carry `bitmap`. */
    table ina_members {
        key = {
            standard_metadata.ingress_port: exact;
            hdr.ipv4.src_addr: exact;
            hdr.ina.job_id: exact;
            hdr.ina.worker_id: exact;
        }
        actions = { member; NoAction; }
        default_action = NoAction();
        size = INA_MEMBERS_SIZE;
    }

    action job_server(bit<16> stamp) {
        admit_stamp = stamp;
    }

    /* A job's PS on the port it is attached to. */
    table ina_servers {
        key = {
            standard_metadata.ingress_port: exact;
            hdr.ipv4.src_addr: exact;
            hdr.ina.job_id: exact;
        }
        actions = { job_server; NoAction; }
        default_action = NoAction();
        size = INA_JOBS_SIZE;
    }

    /* worker_id := the job's stamp, the UDP checksum updated for it (0 stays 0:
     * no checksum; a computed 0 is sent as 0xFFFF). */
    action write_stamp() {
        bit<32> s = (bit<32>)(~hdr.udp.checksum) + (bit<32>)(~hdr.ina.worker_id)
                    + (bit<32>)admit_stamp;
        s = (s & 0xFFFF) + (s >> 16);
        s = (s & 0xFFFF) + (s >> 16);
        bit<16> c = ~(bit<16>)s;
        if (hdr.udp.checksum != 0) {
            hdr.udp.checksum = (c == 0) ? 16w0xFFFF : c;
        }
        hdr.ina.worker_id = admit_stamp;
    }

    action refuse(bit<32> reason) {
        mark_to_drop(standard_metadata);
        ina_admission_drops.count(reason);
        meta.ina.handled = 1;
    }

    apply {
        if (hdr.ina.isValid()) {
            if (hdr.ina.msg_type == INA_GRAD
                    && (hdr.ina.bitmap == 0 || hdr.ina.count == 0)) {
                refuse(INA_ADMIT_EMPTY);
            } else if (standard_metadata.ingress_port == CPU_PORT
                       || ina_fabric_ports.apply().hit) {
                /* from the controller or a switch: admitted where it entered */
            } else {
                /* a host port: each table applied at one place (BMv2 allows one
                 * successor per table) */
                bool is_server = false;
                bool is_member = false;
                own_bit = 0;
                if (hdr.ina.msg_type == INA_PARTIAL || hdr.ina.msg_type == INA_RESULT
                        || hdr.ina.msg_type == INA_CLEAR || hdr.ina.msg_type == INA_NACK) {
                    is_server = ina_servers.apply().hit;
                }
                if (hdr.ina.msg_type == INA_GRAD
                        || (hdr.ina.msg_type == INA_NACK && !is_server)) {
                    is_member = ina_members.apply().hit;
                }
                if (hdr.ina.msg_type == INA_GRAD) {
                    if (hdr.ina.count != 1 || hdr.ina.bitmap & (hdr.ina.bitmap - 1) != 0) {
                        refuse(INA_ADMIT_HOST_AGGREGATE);
                    } else if (!is_member) {
                        refuse(INA_ADMIT_NOT_MEMBER);
                    } else if (hdr.ina.bitmap != own_bit) {
                        refuse(INA_ADMIT_WRONG_BIT);
                    } else {
                        write_stamp();
                    }
                } else if (hdr.ina.msg_type == INA_NACK) {
                    if (!is_server && (!is_member || hdr.ina.bitmap != own_bit)) {
                        refuse(INA_ADMIT_NACK);
                    } else {
                        write_stamp();
                    }
                } else if (hdr.ina.msg_type == INA_PARTIAL || hdr.ina.msg_type == INA_RESULT
                           || hdr.ina.msg_type == INA_CLEAR) {
                    if (!is_server) {
                        refuse(INA_ADMIT_NOT_SERVER);
                    } else {
                        write_stamp();
                    }
                } else {
                    refuse(INA_ADMIT_BAD_TYPE);
                }
            }
        }
    }
}

#endif  /* _GRADNET_ADMISSION_P4_ */
