"""The JAX coordinator's address: bound where it was given, and a taken port refused first.

`jax.distributed.initialize` binds its coordinator on every interface (`[::]:port`) with
SO_REUSEPORT unless told otherwise: any host that reaches the port can join as a task (one
unauthenticated connection aborted a whole job), and a second job given the same port binds it
too and takes the first one's tasks. So process 0 checks the port is free, and the coordinator
binds the address it was given (JAX_COORDINATOR_BIND_ADDRESS, when set, still wins). The service
has no authentication: on a real cluster the port must stay on a private network (docs/guides/gpu-slurm.md).
Kept free of JAX imports: launch/cluster.py checks its --port with it.
"""

from __future__ import annotations

import os
import socket

from b2tjax.errors import UserError


def split_address(address: str) -> tuple[str, int]:
    """("host", port) of "host:port" or "[v6]:port"; a malformed address is a UserError."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UserError(f"the coordinator address {address!r} is not host:port")
    return host.strip("[]"), int(port)


def port_problem(host: str, port: int) -> str | None:
    """Why `host:port` cannot serve as the coordinator's port, or None. The probe binds without
    SO_REUSEPORT: JAX's gRPC coordinator binds with it, so a second job's would share the port."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    except socket.gaierror as err:
        return f"the coordinator host {host} does not resolve ({err.strerror})"
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a TIME_WAIT leftover is fine
        try:
            probe.bind((host, port))
        except OSError as err:
            return f"the coordinator port {port} on {host} is taken ({err.strerror}); choose another port"
    return None


def bind_address(address: str, process_id: int) -> str:
    """The address the coordinator binds: JAX_COORDINATOR_BIND_ADDRESS, else the one it was given.
    On process 0 (the coordinator's host) a taken port is a UserError naming it."""
    bind = os.environ.get("JAX_COORDINATOR_BIND_ADDRESS") or address
    if process_id == 0:
        problem = port_problem(*split_address(bind))
        if problem is not None:
            raise UserError(problem)
    return bind
