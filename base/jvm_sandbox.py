"""The network a JVM tailtune starts may use: a Java security policy that grants what the program needs but the
network, and connections to the given endpoints (IP literals and ports) only; no name may be resolved.

Which endpoints a JVM may be given is the egress rules' decision (`control.egress`, `Egress.jvm_options`):
this module only writes the policy. A JVM that needs no network at all (the full query log reader) is given
none. A connection the policy does not grant fails inside the JVM with an `AccessControlException` naming the
host and port — whatever asked for it: a library, or a JMX client following the RMI stub a server sent (the stub
names the host and port to connect back to).
"""

from __future__ import annotations

import hashlib
import ipaddress
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Final

__all__ = ["sandbox_options"]

_POLICY: Final = """grant {
  permission java.io.FilePermission "<<ALL FILES>>", "read,write,delete,execute,readlink";
  permission java.lang.RuntimePermission "*";
  permission java.lang.reflect.ReflectPermission "*";
  permission java.util.PropertyPermission "*", "read,write";
  permission java.security.SecurityPermission "*";
  permission java.io.SerializablePermission "*";
  permission java.nio.file.LinkPermission "hard";
  permission java.nio.file.LinkPermission "symbolic";
  permission java.util.logging.LoggingPermission "control";
  permission java.lang.management.ManagementPermission "control";
  permission java.lang.management.ManagementPermission "monitor";
  permission javax.management.MBeanServerPermission "*";
  permission javax.management.MBeanPermission "*", "*";
  permission javax.management.MBeanTrustPermission "*";
  permission javax.management.remote.SubjectDelegationPermission "*";
  permission javax.security.auth.AuthPermission "*";
  permission java.net.NetPermission "*";
@SOCKETS@};
"""


def sandbox_options(endpoints: Sequence[tuple[str, int]] = ()) -> list[str]:
    """JVM options that install the policy granting connections to `endpoints` ((IP literal, port) pairs) only.
    The policy file is written once per endpoint set under the temporary folder. ValueError for an endpoint
    that is not an IP literal and a port."""
    lines = []
    for address, port in endpoints:
        ip = ipaddress.ip_address(address.strip("[]"))  # ValueError for a name
        if not 0 < int(port) < 65536:
            raise ValueError(f"{address}:{port}: not a port")
        shown = f"[{ip}]" if ip.version == 6 else str(ip)
        lines.append(f'  permission java.net.SocketPermission "{shown}:{int(port)}", "connect";\n')
    policy = _POLICY.replace("@SOCKETS@", "".join(lines))
    digest = hashlib.sha256(policy.encode()).hexdigest()[:16]
    path = Path(tempfile.gettempdir()) / f"tailtune-jvm-{digest}-{os.getuid()}.policy"
    if not path.is_file() or path.read_text() != policy:
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_text(policy)
        tmp.replace(path)
    return ["-Djava.security.manager", f"-Djava.security.policy=={path}"]
