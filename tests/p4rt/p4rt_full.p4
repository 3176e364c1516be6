// p4rt_full.p4 -- every P4Runtime-visible object kind, for the P4Runtime server tests.
//
// Tables of every match kind (exact, lpm, ternary, range, optional), a direct
// counter and a direct meter, an action selector, an indexed counter, meter and
// register, a digest, a parser value set (its kinds go to port 6), a const
// table, a const default action, @tableonly/@defaultonly actions and
// packet_in / packet_out controller headers. Packets from the CPU port carry a
// packet_out header and go to its egress_port; packets sent to the CPU port get
// a packet_in header carrying their ingress port, so a packet-out to CPU_PORT
// comes back as a packet-in.
#include <core.p4>
#include <v1model.p4>

const bit<9> CPU_PORT = 255;

@controller_header("packet_out")
header packet_out_t {
    bit<9> egress_port;
    bit<7> _pad;
}

@controller_header("packet_in")
header packet_in_t {
    bit<9> ingress_port;
    bit<7> _pad;
}

header h_t {
    bit<8>  kind;
    bit<32> dst;
    bit<16> tport;
    bit<16> rport;
    bit<8>  opt;
    bit<8>  out;
}

struct headers_t {
    packet_out_t pout;
    packet_in_t  pin;
    h_t          h;
}

struct metadata_t {
    bit<8>  color;
    bit<16> sel;
    bit<8>  special;
}

struct learn_t {
    bit<8> kind;
    bit<9> port;
}

parser MyParser(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                inout standard_metadata_t standard_metadata) {
    value_set<bit<8>>(4) special_kinds;

    state start {
        transition select(standard_metadata.ingress_port) {
            CPU_PORT: parse_pout;
            default: parse_h;
        }
    }
    state parse_pout {
        pkt.extract(hdr.pout);
        transition parse_h;
    }
    state parse_h {
        pkt.extract(hdr.h);
        transition select(hdr.h.kind) {
            special_kinds: mark_special;
            default: accept;
        }
    }
    state mark_special {
        meta.special = 1;
        transition accept;
    }
}

control MyVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control MyIngress(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    direct_counter(CounterType.packets_and_bytes) exact_hits;
    direct_meter<bit<8>>(MeterType.bytes) lpm_rate;
    counter(16, CounterType.packets_and_bytes) kind_count;
    meter(16, MeterType.packets) kind_rate;
    register<bit<32>>(16) last_dst;
    action_selector(HashAlgorithm.crc16, 64, 16) ecmp;

    action drop() {
        mark_to_drop(standard_metadata);
    }
    action fwd(bit<9> port) {
        standard_metadata.egress_spec = port;
    }
    action set_out(bit<8> v) {
        hdr.h.out = v;
    }
    action set_out_rated(bit<8> v) {
        lpm_rate.read(meta.color);
        hdr.h.out = v;
    }
    action to_cpu() {
        standard_metadata.egress_spec = CPU_PORT;
    }
    action miss() {
        hdr.h.out = 0xEE;
    }
    action hit_only() {
        hdr.h.out = 0x11;
    }

    table t_exact {
        key = { hdr.h.kind: exact; }
        actions = { fwd; set_out; drop; to_cpu; @tableonly hit_only; @defaultonly miss; NoAction; }
        default_action = miss();
        counters = exact_hits;
    }
    table t_lpm {
        key = { hdr.h.dst: lpm; }
        actions = { set_out_rated; NoAction; }
        default_action = NoAction();
        meters = lpm_rate;
    }
    table t_ternary {
        key = {
            hdr.h.tport: ternary;
            hdr.h.kind: exact;
        }
        actions = { set_out; NoAction; }
        default_action = NoAction();
    }
    table t_range {
        key = { hdr.h.rport: range; }
        actions = { set_out; NoAction; }
        default_action = NoAction();
    }
    table t_optional {
        key = {
            hdr.h.opt: optional;
            hdr.h.kind: exact;
        }
        actions = { set_out; NoAction; }
        default_action = NoAction();
    }
    table t_sel {
        key = {
            hdr.h.kind: exact;
            meta.sel: selector;
        }
        actions = { fwd; NoAction; }
        implementation = ecmp;
    }
    table t_const {
        key = { hdr.h.kind: exact; }
        actions = { set_out; NoAction; }
        const entries = {
            8w0xC0: set_out(8w0xC1);
        }
        default_action = NoAction();
    }
    table t_const_default {
        key = { hdr.h.kind: exact; }
        actions = { set_out; NoAction; }
        const default_action = NoAction();
    }

    apply {
        if (hdr.pout.isValid()) {
            standard_metadata.egress_spec = hdr.pout.egress_port;
            hdr.pout.setInvalid();
        } else {
            meta.sel = hdr.h.tport;
            kind_count.count((bit<32>)hdr.h.kind[3:0]);
            kind_rate.execute_meter((bit<32>)hdr.h.kind[3:0], meta.color);
            last_dst.write((bit<32>)hdr.h.kind[3:0], hdr.h.dst);
            if (hdr.h.kind == 0x77) {
                digest<learn_t>(1, { hdr.h.kind, standard_metadata.ingress_port });
            }
            standard_metadata.egress_spec = 1;
            if (meta.special == 1) {
                standard_metadata.egress_spec = 6;
            }
            t_exact.apply();
            t_lpm.apply();
            t_ternary.apply();
            t_range.apply();
            t_optional.apply();
            t_sel.apply();
            t_const.apply();
            t_const_default.apply();
        }
    }
}

control MyEgress(inout headers_t hdr, inout metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    apply {
        if (standard_metadata.egress_port == CPU_PORT) {
            hdr.pin.setValid();
            hdr.pin.ingress_port = standard_metadata.ingress_port;
            hdr.pin._pad = 0;
        }
    }
}

control MyComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control MyDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.pin);
        pkt.emit(hdr.h);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
