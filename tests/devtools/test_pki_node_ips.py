"""The apiserver's serving certificate names the node IPs the relays listen on (controlplane.pki)."""

from __future__ import annotations

import ipaddress
from pathlib import Path

from cryptography import x509

from fabriccap_devtools.controlplane import host, pki


def ip_names(cert: Path) -> set[str]:
    san = x509.load_pem_x509_certificate(cert.read_bytes()).extensions.get_extension_for_class(
        x509.SubjectAlternativeName
    )
    return {str(ip) for ip in san.value.get_values_for_type(x509.IPAddress)}


def test_the_serving_certificate_names_the_node_ips_and_is_issued_again_when_they_change(tmp_path: Path) -> None:
    paths = pki.PkiPaths(tmp_path / "pki")
    pki.ensure_pki(paths)
    assert ip_names(paths.serving_cert) == set(pki.SERVING_IPS)
    ca = paths.ca_cert.read_bytes()

    pki.ensure_pki(paths, node_ips=["198.18.1.1", "198.18.2.1"])
    assert ip_names(paths.serving_cert) == {*pki.SERVING_IPS, "198.18.1.1", "198.18.2.1"}
    first = paths.serving_cert.read_bytes()
    # The same addresses: kept as it is (and the CA always: kubeconfigs minted before stay valid).
    pki.ensure_pki(paths, node_ips=["198.18.2.1", "198.18.1.1"])
    assert paths.serving_cert.read_bytes() == first
    assert paths.ca_cert.read_bytes() == ca


def test_every_node_ip_is_the_first_address_of_its_slot_subnet() -> None:
    ips = host.every_node_ip()
    assert len(ips) == len(set(ips)) == host.MAX_SLOT
    for slot, ip in enumerate(ips, start=1):
        assert ipaddress.ip_address(ip) == host.node_subnet(slot).network_address + 1
        assert host.node_ip(slot) == ip
