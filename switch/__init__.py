"""tailfabric's software P4 target: a P4-16/v1model front-end, compiler and executor."""
