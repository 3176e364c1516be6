// registers.p4 -- register arrays read and written in ingress and egress.
//
// Covers: register<bit<32>> declared in ingress and register<bit<16>> in egress;
// read(out, bit<32> index) and write(bit<32> index, value) with a run-time
// index cast from bit<8>; state kept from one packet to the next; initial value
// 0; values preset from the control plane with STF `register_write`
// (`register_read` is also issued; BMv2's STF runner does not check its output).
// Each packet records the old values and increments them (ingress by 1,
// egress by 0x0100).
#include <core.p4>
#include <v1model.p4>

header r_t {
    bit<8>  idx;
    bit<32> in_old;
    bit<16> eg_old;
}

struct headers_t { r_t r; }
struct metadata_t { }

parser MyParser(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        pkt.extract(hdr.r);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control MyIngress(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    register<bit<32>>(8) reg_in;
    apply {
        bit<32> v;
        reg_in.read(v, (bit<32>)hdr.r.idx);
        hdr.r.in_old = v;
        reg_in.write((bit<32>)hdr.r.idx, v + 1);
        standard_metadata.egress_spec = 1;
    }
}

control MyEgress(inout headers_t hdr, inout metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    register<bit<16>>(4) reg_eg;
    apply {
        bit<16> w;
        reg_eg.read(w, (bit<32>)hdr.r.idx);
        hdr.r.eg_old = w;
        reg_eg.write((bit<32>)hdr.r.idx, w + 16w0x0100);
    }
}

control MyComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control MyDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.r);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
