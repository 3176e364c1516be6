"""tailfabric's tests (a package so helpers such as ``tests.netkit`` can be imported)."""
