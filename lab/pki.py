"""The lab's PKI: a CA, a front-proxy CA, a certificate per identity (ECDSA P-256, made
with the openssl command line) and self-contained kubeconfigs, as kubeadm lays them out."""

from __future__ import annotations

import base64
import subprocess
from pathlib import Path

import yaml

from lab.processes import LabError


def openssl(*args: str, cwd: Path) -> None:
    r = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True)
    if r.returncode != 0:
        raise LabError(f"openssl {' '.join(args)} failed: {r.stderr.strip()}")


def make_ca(pki: Path, name: str, cn: str) -> None:
    openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", f"{name}.key", cwd=pki)
    openssl(
        "req",
        "-x509",
        "-new",
        "-key",
        f"{name}.key",
        "-out",
        f"{name}.crt",
        "-days",
        "3650",
        "-subj",
        f"/CN={cn}",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign,digitalSignature",
        cwd=pki,
    )


def make_cert(
    pki: Path,
    name: str,
    ca: str,
    subj: str,
    *,
    server_sans: list[str] | None = None,
    client: bool = True,
) -> None:
    ext = [
        "basicConstraints=critical,CA:FALSE",
        "keyUsage=critical,digitalSignature,keyEncipherment",
        "subjectKeyIdentifier=hash",
        "authorityKeyIdentifier=keyid,issuer",
    ]
    usages = []
    if server_sans:
        usages.append("serverAuth")
        ext.append("subjectAltName=" + ",".join(server_sans))
    if client:
        usages.append("clientAuth")
    ext.append("extendedKeyUsage=" + ",".join(usages))
    (pki / f"{name}.ext").write_text("\n".join(ext) + "\n")
    openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", f"{name}.key", cwd=pki)
    openssl("req", "-new", "-key", f"{name}.key", "-out", f"{name}.csr", "-subj", subj, cwd=pki)
    openssl(
        "x509",
        "-req",
        "-in",
        f"{name}.csr",
        "-CA",
        f"{ca}.crt",
        "-CAkey",
        f"{ca}.key",
        "-CAcreateserial",
        "-out",
        f"{name}.crt",
        "-days",
        "3650",
        "-extfile",
        f"{name}.ext",
        cwd=pki,
    )
    (pki / f"{name}.csr").unlink()
    (pki / f"{name}.ext").unlink()


def write_kubeconfig(path: Path, server: str, ca: Path, cert: Path, key: Path, user: str) -> None:
    """A self-contained kubeconfig (certificates embedded, like kubeadm's scheduler.conf), so
    it can be copied into a container or another host directory as is."""

    def b64(p: Path) -> str:
        return base64.b64encode(p.read_bytes()).decode()

    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "loadwise-lab",
                "cluster": {"server": server, "certificate-authority-data": b64(ca)},
            }
        ],
        "users": [
            {
                "name": user,
                "user": {"client-certificate-data": b64(cert), "client-key-data": b64(key)},
            }
        ],
        "contexts": [
            {"name": "loadwise-lab", "context": {"cluster": "loadwise-lab", "user": user}}
        ],
        "current-context": "loadwise-lab",
    }
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    path.chmod(0o600)


def write_pki(pki: Path, run: Path, server: str) -> None:
    """Everything the lab's programs authenticate with, in `pki`; kubeconfigs in `run`."""
    make_ca(pki, "ca", "loadwise-lab-ca")
    make_ca(pki, "front-proxy-ca", "loadwise-lab-front-proxy-ca")
    sans = [
        "IP:127.0.0.1",
        "DNS:localhost",
        "IP:10.96.0.1",
        "DNS:kubernetes",
        "DNS:kubernetes.default",
        "DNS:kubernetes.default.svc",
        "DNS:kubernetes.default.svc.cluster.local",
    ]
    make_cert(pki, "apiserver", "ca", "/CN=kube-apiserver", server_sans=sans, client=False)
    make_cert(pki, "admin", "ca", "/O=system:masters/CN=loadwise-lab-admin")
    make_cert(pki, "controller-manager", "ca", "/CN=system:kube-controller-manager")
    make_cert(pki, "scheduler", "ca", "/CN=system:kube-scheduler")
    make_cert(pki, "kwok", "ca", "/CN=kwok", server_sans=["IP:127.0.0.1", "DNS:localhost"])
    make_cert(pki, "front-proxy-client", "front-proxy-ca", "/CN=front-proxy-client")
    # Service-account token signing key (ES256) and its public half.
    openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "sa.key", cwd=pki)
    openssl("ec", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=pki)
    for f in pki.glob("*.key"):
        f.chmod(0o600)
    for name, user in (
        ("admin", "loadwise-lab-admin"),
        ("controller-manager", "system:kube-controller-manager"),
        ("scheduler", "system:kube-scheduler"),
    ):
        write_kubeconfig(
            run / f"{name}.kubeconfig",
            server,
            pki / "ca.crt",
            pki / f"{name}.crt",
            pki / f"{name}.key",
            user,
        )
