// cpu_port.p4 -- packet I/O through the CPU port and queue telemetry, for the switch tests.
//
// A packet from the CPU port carries a packet_out header: it goes out of the port the header
// names. A packet from any other port goes to the port in the forward table (exact on the
// ingress port), or to the CPU with a packet_in header (ingress port) on a miss. Egress writes
// the queueing metadata into a telemetry header when one is present (EtherType 0x88b5).
#include <core.p4>
#include <v1model.p4>

@controller_header("packet_out")
header packet_out_t { bit<9> egress_port; bit<7> pad; }

@controller_header("packet_in")
header packet_in_t { bit<9> ingress_port; bit<7> pad; }

header ethernet_t { bit<48> dst; bit<48> src; bit<16> ether_type; }
header telemetry_t {
    bit<32> enq_timestamp; bit<32> enq_qdepth; bit<32> deq_timedelta; bit<32> deq_qdepth;
    bit<8> priority; bit<8> egress_port; bit<16> pad;
}

struct headers_t {
    packet_out_t packet_out;
    packet_in_t packet_in;
    ethernet_t ethernet;
    telemetry_t telemetry;
}
struct meta_t { }

const bit<9> CPU_PORT = 255;

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        transition select(sm.ingress_port) {
            CPU_PORT: parse_packet_out;
            default: parse_ethernet;
        }
    }
    state parse_packet_out {
        pkt.extract(hdr.packet_out);
        transition parse_ethernet;
    }
    state parse_ethernet {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            0x88b5: parse_telemetry;
            default: accept;
        }
    }
    state parse_telemetry {
        pkt.extract(hdr.telemetry);
        transition accept;
    }
}

control V(inout headers_t hdr, inout meta_t meta) { apply { } }

control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action to_port(bit<9> port) { sm.egress_spec = port; }
    action to_cpu() {
        sm.egress_spec = CPU_PORT;
        hdr.packet_in.setValid();
        hdr.packet_in.ingress_port = sm.ingress_port;
    }
    action set_priority(bit<3> prio) { sm.priority = prio; }
    table forward {
        key = { sm.ingress_port: exact; }
        actions = { to_port; to_cpu; }
        default_action = to_cpu();
    }
    table qos {
        key = { hdr.ethernet.src: exact; }
        actions = { set_priority; NoAction; }
        default_action = NoAction();
    }
    apply {
        if (hdr.packet_out.isValid()) {
            sm.egress_spec = hdr.packet_out.egress_port;
            hdr.packet_out.setInvalid();
        } else {
            forward.apply();
            qos.apply();
        }
    }
}

control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        if (hdr.telemetry.isValid()) {
            hdr.telemetry.enq_timestamp = sm.enq_timestamp;
            hdr.telemetry.enq_qdepth = (bit<32>)sm.enq_qdepth;
            hdr.telemetry.deq_timedelta = sm.deq_timedelta;
            hdr.telemetry.deq_qdepth = (bit<32>)sm.deq_qdepth;
            hdr.telemetry.priority = (bit<8>)sm.priority;
            hdr.telemetry.egress_port = (bit<8>)sm.egress_port;
        }
    }
}

control C(inout headers_t hdr, inout meta_t meta) { apply { } }

control D(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.packet_in);
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.telemetry);
    }
}

V1Switch(P(), V(), I(), E(), C(), D()) main;
