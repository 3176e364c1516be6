// random_log_digest.p4 -- random() with lo == hi, log_msg() and digest().
//
// Covers: random(out r, lo, hi) with lo == hi, which must return lo (bit<8> and
// bit<16>); log_msg with a plain string and with a format string plus a tuple
// of fields; digest<T>(receiver, data) with a named struct type built from a
// list expression. log_msg and digest have no effect on the packet.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8>  a;
    bit<8>  r8;
    bit<16> r16;
}

struct digest_t {
    bit<8> a;
    bit<9> port;
}

struct headers_t { h_t h; }
struct metadata_t { }

parser MyParser(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        pkt.extract(hdr.h);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control MyIngress(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    apply {
        random(hdr.h.r8, 8w0x5A, 8w0x5A);
        random(hdr.h.r16, 16w0xBEEF, 16w0xBEEF);
        log_msg("random_log_digest: packet seen");
        log_msg("a = {}, r8 = {}", { hdr.h.a, hdr.h.r8 });
        digest<digest_t>(32w1, { hdr.h.a, standard_metadata.ingress_port });
        standard_metadata.egress_spec = 1;
    }
}

control MyEgress(inout headers_t hdr, inout metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    apply { }
}

control MyComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control MyDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.h);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
