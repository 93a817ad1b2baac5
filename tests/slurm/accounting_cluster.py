"""A real Slurm 24.11 cluster WITH accounting on one host: Debian's MariaDB, slurmdbd, slurmctld, dynamic slurmd,
and slurmrestd, for the accounting, REST API and exporter tests.

The same rootfs, namespaces and dynamic nodes as ``dynamic_cluster.DynamicCluster``, plus what the accounting pods
run, the way they run it:

* MariaDB and slurmdbd are started by the images' own entrypoint (``images/lib/soperator-entrypoint``, roles
  ``mariadbd`` and ``slurmdbd``), as the users the pods run as (``mysql``; ``slurm``, SlurmUser, for slurmdbd, with
  no capability), from the password file the Secret would mount (0440, the slurm group's as the pod's fsGroup makes
  it): MariaDB's database and user are made by the entrypoint's init file, slurmdbd.conf is assembled by the
  entrypoint from the RENDERED template (``slurm_conf.render_slurmdbd_conf``) and the password.
* slurmctld runs as SlurmUser ``slurm`` (``dynamic_cluster``), started by the entrypoint's controller role, which
  gives it its own copy of the JWT key; slurm.conf gets the rendered accounting and JWT lines
  (``slurm_conf.render_slurm_conf``).
* The database is an External one with TLS (``spec.accounting.database.tls``): MariaDB serves a certificate for
  DB_HOST signed by a CA the harness makes (and requires TLS of every TCP client), slurmdbd gets that CA where the
  rendered ``StorageParameters=SSL_CA`` names it. DB_HOST is a loopback address other than 127.0.0.1: the MariaDB
  client library skips the host name check for 127.0.0.1 and localhost (measured). MariaDB also listens on
  OTHER_DB_HOST, which its certificate does not name, and loads PAM authentication (auth_pam_v1) for the tests'
  server that asks for the password in clear text.
* Only addresses differ: everything else listens on 127.0.0.1 at free ports (the host's network is shared), so the
  rendered ``DbdHost``/``DbdPort``/``StoragePort``/``AccountingStorageHost``/``Port`` values are rewritten to this
  host's.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import shutil
import subprocess
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from dynamic_cluster import DynamicCluster
from slurm_cluster import HOSTNAME, REPO, free_ports, wait_for

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.api import spec
from ansible_collections.soperator.slurm.plugins.module_utils.render import slurm_conf

SLURM_USER = names.SLURM_USER

ENTRYPOINT = REPO / "images" / "lib" / "soperator-entrypoint"
CLUSTER = "scaletest"  # dynamic_cluster's ClusterName
DB_NAME, DB_USER = "slurm_acct_db", "slurm"
REST_USER, REST_UID = "slurmrestd", names.SLURMRESTD_UID
ACCOUNTS = ("physics", "chemistry")
DB_HOST, OTHER_DB_HOST = "127.0.0.2", "127.0.0.3"
DB_CA_KEY = "ca.pem"  # the key of the CA in its Secret (tls.caSecretRef.key): the file's name in DB_CA_MOUNT
MARIADB_TLS_DIR = "/etc/mysql/soperator-test-tls"


def accounting_spec(**database) -> dict:
    """A SlurmCluster with accounting (External type: the harness runs the database itself, with TLS) and the REST
    API; ``database`` overrides fields of spec.accounting.database."""
    return spec.validate_cluster({
        "apiVersion": names.API_VERSION, "kind": names.CLUSTER_KIND,
        "metadata": {"name": "demo", "namespace": "slurm"},
        "spec": {"clusterName": CLUSTER, "jail": {"storageClassName": "standard", "size": "1Gi"},
                 "accounting": {"enabled": True, "database": dict({
                     "type": "External", "host": DB_HOST, "name": DB_NAME, "user": DB_USER,
                     "passwordSecretRef": {"name": "db", "key": "password"},
                     "tls": {"caSecretRef": {"name": "db-ca", "key": DB_CA_KEY}}}, **database)},
                 "restApi": {"enabled": True}},
    })


def _pem(cert) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def certificate_authority(name: str):
    """(key, certificate) of a new CA, valid for a day."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False, decipher_only=False),
                           critical=True)
            .sign(key, hashes.SHA256()))
    return key, cert


def server_certificate(ca, address: str):
    """(key PEM, certificate PEM) of a server at ``address``, signed by ``ca`` (its key, its certificate)."""
    ca_key, ca_cert = ca
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, address)]))
            .issuer_name(ca_cert.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(address))]),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    return key_pem, _pem(cert)


def _set(text: str, key: str, value) -> str:
    lines = [f"{key}={value}" if line.split("=", 1)[0] == key else line for line in text.splitlines()]
    return "\n".join(lines) + "\n"


class AccountingCluster(DynamicCluster):
    def __init__(self, workdir=None):
        super().__init__(workdir)
        self.db_port = self.dbd_port = self.rest_port = 0
        self.password = "pw" + os.urandom(12).hex()
        self.ca = certificate_authority("soperator test database CA")
        self.other_ca = certificate_authority("another CA")

    def prepare(self) -> None:
        super().prepare()
        r = self.root
        self.db_port, self.dbd_port, self.rest_port = free_ports(3)
        cluster = accounting_spec()
        # slurm.conf: the rendered accounting and JWT lines, at this host's addresses.
        rendered = slurm_conf.render_slurm_conf(cluster, []).splitlines()
        start = rendered.index(next(line for line in rendered if line.startswith("# Accounting")))
        end = rendered.index("", start)
        extra = rendered[start:end] + [line for line in rendered if line.startswith("AuthAlt")]
        extra = ["AccountingStorageHost=127.0.0.1" if line.startswith("AccountingStorageHost=") else
                 f"AccountingStoragePort={self.dbd_port}" if line.startswith("AccountingStoragePort=") else line
                 for line in extra]
        conf = (r / "etc/slurm/slurm.conf").read_text()
        conf += "PriorityType=priority/multifactor\n" + "\n".join(extra) + "\n"
        (r / "etc/slurm/slurm.conf").write_text(conf)
        # slurmdbd.conf template (no password): rendered, at this host's addresses.
        template = slurm_conf.render_slurmdbd_conf(cluster)
        assert "StoragePass" not in template.replace("# StoragePass", "")
        for key, value in (("DbdHost", HOSTNAME), ("DbdPort", self.dbd_port), ("StoragePort", self.db_port)):
            template = _set(template, key, value)
        self.write(names.SLURMDBD_CONFIG_MOUNT + "/slurmdbd.conf", template, 0o644)
        # The Secrets as slurmdbd's pod mounts them: 0440, the slurm group's (fsGroup). The controller pod mounts the
        # JWT key root's 0400; its entrypoint gives slurmctld a copy (here the same file serves both).
        self.secret_file(names.DB_PASSWORD_MOUNT + "/password", (self.password + "\n").encode())
        self.secret_file(names.JWT_KEY_PATH, os.urandom(64))
        # The CA Secret as slurmdbd's pod mounts it (defaultMode 0444), and MariaDB's certificate for DB_HOST.
        self.write("%s/%s" % (names.DB_CA_MOUNT, DB_CA_KEY), _pem(self.ca[1]).decode(), 0o444)
        key, cert = server_certificate(self.ca, DB_HOST)
        self.write(MARIADB_TLS_DIR + "/server.pem", cert.decode(), 0o444)
        os.chown(self.write(MARIADB_TLS_DIR + "/server.key", key.decode(), 0o400), self.uid_of("mysql"), 0)
        shutil.copy2(ENTRYPOINT, r / "usr/local/bin/soperator-entrypoint")
        with open(r / "etc/passwd", "a") as f:
            f.write(f"{REST_USER}:x:{REST_UID}:{REST_UID}::/nonexistent:/usr/sbin/nologin\n")
        with open(r / "etc/group", "a") as f:
            f.write(f"{REST_USER}:x:{REST_UID}:\n")
        init = r / "usr/local/sbin/cluster-init"
        init.write_text(init.read_text().replace("/usr/sbin/slurmctld\n", self._accounting_init()))

    def uid_of(self, user: str) -> int:
        return next(int(line.split(":")[2]) for line in (self.root / "etc/passwd").read_text().splitlines()
                    if line.split(":")[0] == user)

    def slurm_gid(self) -> int:
        return next(int(line.split(":")[2]) for line in (self.root / "etc/group").read_text().splitlines()
                    if line.split(":")[0] == SLURM_USER)

    def secret_file(self, path: str, data: bytes, root: Path | None = None) -> Path:
        """A Secret's file as the kubelet writes it with the pod's fsGroup = slurm: root's, group slurm, 0440."""
        p = (root or self.root) / path.lstrip("/")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
        os.chown(p, 0, self.slurm_gid())
        os.chmod(p, 0o440)
        return p

    def pod_dir(self, path: str, root: Path | None = None) -> Path:
        """An emptyDir of slurmdbd's pod: world-writable, setgid slurm (fsGroup)."""
        p = (root or self.root) / path.lstrip("/")
        p.mkdir(parents=True, exist_ok=True)
        os.chown(p, 0, self.slurm_gid())
        os.chmod(p, 0o2777)
        return p

    def write(self, path: str, text: str, mode: int) -> Path:
        p = self.root / path.lstrip("/")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        os.chmod(p, mode)
        return p

    def _accounting_init(self) -> str:
        """MariaDB and slurmdbd through the entrypoint, as their pods' users (slurmdbd: SlurmUser, its pod's
        runAsUser and fsGroup); then slurmctld through the entrypoint's controller role (it drops to SlurmUser)."""
        return f"""\
install -d -o mysql -g mysql /run/mysqld /var/lib/mysql
install -d -m 2777 -g {SLURM_USER} /run/slurmdbd
# The kubelet's termination log: a file anyone in the container may write.
install -m 0666 /dev/null /var/log/slurm/termination.log
export SOPERATOR_TERMINATION_LOG=/var/log/slurm/termination.log
# MariaDB reads the same password file; its own pod would make it the mysql group's, here it joins slurm's. An
# External database with TLS: every TCP client must use it; PAM for the clear-text test's user.
setpriv --reuid=mysql --regid=mysql --groups={self.slurm_gid()} env SOPERATOR_DB_NAME={DB_NAME} \\
  SOPERATOR_DB_USER={DB_USER} \\
  /usr/local/bin/soperator-entrypoint /usr/sbin/mariadbd --port={self.db_port} \\
  --bind-address={DB_HOST},{OTHER_DB_HOST} --skip-name-resolve --ssl-cert={MARIADB_TLS_DIR}/server.pem \\
  --ssl-key={MARIADB_TLS_DIR}/server.key --require-secure-transport=ON --plugin-load-add=auth_pam_v1.so \\
  --pam-use-cleartext-plugin=ON >/var/log/slurm/mariadb.log 2>&1 &
setpriv --reuid={SLURM_USER} --regid={SLURM_USER} --init-groups --inh-caps=-all --bounding-set=-all \\
  /usr/local/bin/soperator-entrypoint /usr/sbin/slurmdbd -D >/var/log/slurm/slurmdbd.log 2>&1 &
i=0
while ! sacctmgr -n -P show cluster format=cluster >/dev/null 2>&1; do
  i=$((i + 1)); [ $i -lt 900 ] || {{ echo "slurmdbd did not answer" >&2; exit 1; }}; sleep 0.2
done
SOPERATOR_RECONFIGURE=0 /usr/local/bin/soperator-entrypoint /usr/sbin/slurmctld
"""

    def start(self, timeout: float = 240) -> None:
        # MariaDB initialises its volume and slurmdbd creates its tables before slurmctld starts: slower than a
        # plain cluster, and much slower while other work shares the two cores.
        super().start(timeout)

    # ---- slurmctld restarts ------------------------------------------------------------------
    def restart_slurmctld(self, timeout: float = 60) -> None:
        pid = self.run(["cat", "/run/slurmctld.pid"]).check().stdout.strip()
        self.run(["kill", "-TERM", pid]).check()
        wait_for(lambda: self.run(["kill", "-0", pid]).returncode != 0, timeout, "slurmctld to exit")
        self.run(["/usr/sbin/slurmctld"]).check()
        wait_for(lambda: self.run(["scontrol", "ping"], timeout=10).returncode == 0, timeout, "slurmctld to answer")

    # ---- slurmrestd ----------------------------------------------------------------------------
    def start_slurmrestd(self, args: list[str], env: dict[str, str], timeout: float = 30) -> subprocess.Popen:
        """slurmrestd as its pod runs it (``args``/``env`` are the rendered container's): its own user, and NO munge
        socket (a private mount namespace hides /run/munge), as in its pod, which has no munge key."""
        command = " ".join(["exec", "env"] + [f"{k}={v}" for k, v in env.items()]
                           + ["setpriv", f"--reuid={REST_USER}", f"--regid={REST_USER}", "--clear-groups"]
                           + args + [">/var/log/slurm/slurmrestd.log", "2>&1"])
        proc = subprocess.Popen(self.command_prefix() + ["unshare", "-m", "sh", "-c",
                                                         "mount -t tmpfs tmpfs /run/munge && " + command],
                                stdin=subprocess.DEVNULL)
        wait_for(lambda: self.run(["bash", "-c", f"exec 3<>/dev/tcp/127.0.0.1/{self.rest_port}"], timeout=5)
                 .returncode == 0 or proc.poll() is not None, timeout, "slurmrestd to listen")
        if proc.poll() is not None:
            raise AssertionError("slurmrestd exited %s:\n%s" % (proc.returncode, self.log_tail("slurmrestd.log")))
        return proc

    # ---- the exporter -------------------------------------------------------------------------
    def start_exporter(self, binary: str, args: list[str], port: int, timeout: float = 30, user: str = "nobody",
                       log: str = "exporter.log") -> subprocess.Popen:
        """Our exporter as its pod runs it (``args`` are the rendered container's): as nobody (another ``user``
        tells its Slurm calls apart in sdiag's RPC counts by user), a Slurm client with munge and slurm.conf, on this
        host's ``port``."""
        target = self.root / names.EXPORTER_BINARY.lstrip("/")
        shutil.copy2(binary, str(target) + ".new")
        os.replace(str(target) + ".new", target)  # a running exporter keeps its own copy ("text file busy")
        args = [a if not a.startswith("--web.listen-address=") else "--web.listen-address=127.0.0.1:%d" % port
                for a in args]
        command = " ".join(["exec", "setpriv", "--reuid=%s" % user, "--regid=%s" % self.group_of(user),
                            "--clear-groups"] + args + [">/var/log/slurm/%s" % log, "2>&1"])
        proc = subprocess.Popen(self.command_prefix() + ["sh", "-c", command], stdin=subprocess.DEVNULL)
        wait_for(lambda: self.run(["bash", "-c", f"exec 3<>/dev/tcp/127.0.0.1/{port}"], timeout=5).returncode == 0
                 or proc.poll() is not None, timeout, "the exporter to listen")
        if proc.poll() is not None:
            raise AssertionError("the exporter exited %s:\n%s" % (proc.returncode, self.log_tail("exporter.log")))
        return proc

    def group_of(self, user: str) -> str:
        """The name of ``user``'s primary group in the cluster's /etc/passwd and /etc/group."""
        gid = next(line.split(":")[3] for line in (self.root / "etc/passwd").read_text().splitlines()
                   if line.split(":")[0] == user)
        return next(line.split(":")[0] for line in (self.root / "etc/group").read_text().splitlines()
                    if line.split(":")[2] == gid)

    def log_tail(self, name: str, lines: int = 30) -> str:
        return "\n".join(self.log(name).splitlines()[-lines:])

    def termination_message(self) -> str:
        p = self.root / "var/log/slurm/termination.log"
        return p.read_text() if p.exists() else ""

    def entrypoint(self, argv: list[str], env: dict[str, str], timeout: float = 60, user: str | None = None):
        """The image entrypoint with ``SOPERATOR_ROOT`` files, inside the cluster (as ``user``: its pod's)."""
        return self.run(["env"] + [f"{k}={v}" for k, v in env.items()]
                        + ["/usr/local/bin/soperator-entrypoint"] + argv, timeout=timeout, user=user)

    def process(self, name: str) -> dict[str, str]:
        """``/proc/<pid>/status`` of the oldest process called ``name`` in the cluster."""
        out = self.run(["sh", "-c", f'cat /proc/$(pgrep -xo {name})/status']).check().stdout
        return dict(line.split(":", 1) for line in out.splitlines() if ":" in line)


def sh(argv: list[str]) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout
