"""Tests that need root, network namespaces and veths (marker ``net``)."""
