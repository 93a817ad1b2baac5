"""The cluster's PKI (CA, serving and client certificates, by openssl) and its kubeconfigs."""

import base64
import json
import os
import subprocess

import localcluster as lc


def openssl(*args, **kw):
    subprocess.run(["openssl"] + list(args), check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, **kw)


def make_pki(pki, real_node=None):
    os.makedirs(pki, exist_ok=True)
    os.chmod(pki, 0o700)
    ca_key, ca_crt = os.path.join(pki, "ca.key"), os.path.join(pki, "ca.crt")
    # Certificates as kubeadm issues them, so that strict verifiers (Python >= 3.13 sets VERIFY_X509_STRICT)
    # accept them: the CA carries basicConstraints and keyUsage (both critical) and a subject key identifier;
    # every leaf names its issuer's key, its usages and, for servers, its SANs.
    openssl("genrsa", "-out", ca_key, "2048")
    openssl("req", "-x509", "-new", "-key", ca_key, "-subj", "/CN=soperator-localcluster-ca", "-days", "3650",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,digitalSignature,keyEncipherment,keyCertSign",
            "-addext", "subjectKeyIdentifier=hash", "-out", ca_crt)

    def issue(name, subj, sans=None, server=False):
        key, csr, crt = (os.path.join(pki, name + ext) for ext in (".key", ".csr", ".crt"))
        ext = os.path.join(pki, name + ".ext")
        openssl("genrsa", "-out", key, "2048")
        openssl("req", "-new", "-key", key, "-subj", subj, "-out", csr)
        with open(ext, "w") as f:
            f.write("basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n")
            f.write("extendedKeyUsage=%s\n" % ("serverAuth,clientAuth" if server else "clientAuth"))
            f.write("authorityKeyIdentifier=keyid:always\n")
            if sans:
                f.write("subjectAltName=%s\n" % ",".join(sans))
        openssl("x509", "-req", "-in", csr, "-CA", ca_crt, "-CAkey", ca_key, "-CAcreateserial", "-days", "3650",
                "-extfile", ext, "-out", crt)
        os.remove(csr)
        os.remove(ext)

    extra_ips = ["IP:" + real_node["gateway"]] if real_node else []
    issue("apiserver", "/CN=kube-apiserver", server=True, sans=extra_ips + [
        "IP:127.0.0.1", "IP:" + lc.SERVICE_IP, "DNS:localhost", "DNS:kubernetes", "DNS:kubernetes.default",
        "DNS:kubernetes.default.svc", "DNS:kubernetes.default.svc.cluster.local"])
    issue("admin", "/O=system:masters/CN=localcluster-admin")
    issue("controller-manager", "/CN=system:kube-controller-manager")
    issue("scheduler", "/CN=system:kube-scheduler")
    issue("kwok", "/O=system:masters/CN=kwok")
    issue("provisioner", "/O=system:masters/CN=localcluster-provisioner")
    # apiserver -> kubelet (logs, exec); bound to system:kubelet-api-admin when a real node exists.
    issue("apiserver-kubelet-client", "/CN=kube-apiserver-kubelet-client")
    if real_node:
        issue("kubelet", "/O=system:nodes/CN=system:node:" + lc.REAL_NODE)
        issue("kube-proxy", "/CN=system:kube-proxy")
        issue("coredns", "/CN=system:coredns")
    openssl("genrsa", "-out", os.path.join(pki, "sa.key"), "2048")
    openssl("rsa", "-in", os.path.join(pki, "sa.key"), "-pubout", "-out", os.path.join(pki, "sa.pub"))


def write_kubeconfig(path, server, pki, user):
    def b64(name):
        with open(os.path.join(pki, name), "rb") as f:
            return base64.b64encode(f.read()).decode()

    cfg = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "localcluster", "cluster": {
            "server": server, "certificate-authority-data": b64("ca.crt")}}],
        "users": [{"name": user, "user": {
            "client-certificate-data": b64(user + ".crt"), "client-key-data": b64(user + ".key")}}],
        "contexts": [{"name": "localcluster", "context": {"cluster": "localcluster", "user": user}}],
        "current-context": "localcluster",
    }
    with open(path, "w") as f:
        json.dump(cfg, f, indent=2)  # JSON is valid YAML; keeps this file stdlib-only
    os.chmod(path, 0o600)
