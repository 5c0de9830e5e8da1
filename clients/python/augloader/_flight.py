"""The Arrow Flight transport: the request as a DoGet ticket, the batches
as FlightData (pyarrow.flight). The response comes from GetFlightInfo
(its app_metadata); the stream's last FlightData, with no data, is the
trailer: a stream without one was cut and raises, as on the socket."""
from __future__ import annotations

import json
from urllib.parse import urlparse

import pyarrow as pa

from . import _wire
from ._wire import ConnectionLost, ServerError, check_schema, schema_info
from .batch import Batch
from .structures import StructureBatch


def location(url: str) -> str:
    u = urlparse(url)
    if u.scheme == "grpc+unix":
        return f"grpc+unix://{u.path}"
    if u.scheme == "grpc+tls":
        return f"grpc+tls://{u.netloc}"
    return f"grpc+tcp://{u.netloc}"


def open_stream(url: str, req: dict, token, timeout, make_stream, tls_root_certs=None):
    import pyarrow.flight as fl

    kw = {"tls_root_certs": tls_root_certs} if tls_root_certs else {}
    client = fl.FlightClient(location(url), **kw)
    headers = [(b"authorization", f"Bearer {token}".encode())] if token else []
    opts = fl.FlightCallOptions(headers=headers, timeout=timeout)
    body = _wire.request_body(req)  # the socket's checks: the same refusals on both transports
    try:
        fi = client.get_flight_info(fl.FlightDescriptor.for_command(body), opts)
        info = json.loads(fi.app_metadata) if fi.app_metadata else {"batches": None}
        reader = client.do_get(fl.Ticket(body), opts)
    except (fl.FlightError, pa.ArrowException) as e:
        client.close()
        raise flight_error(e) from e

    def batches(stream):
        n = graphs = 0
        trailer = info_of = schema = None
        try:
            for chunk in reader:
                if chunk.data is None:  # the trailer
                    trailer = json.loads(bytes(chunk.app_metadata)) if chunk.app_metadata else {}
                    continue
                if trailer is not None:
                    raise ConnectionLost("protocol error: data after the Flight trailer")
                n += 1
                if info_of is None:  # one schema a stream: checked and parsed once
                    # The protocol's schema, as the socket reader checks it:
                    # a damaged or foreign Flight stream is refused, never
                    # trained on.
                    schema = chunk.data.schema
                    info_of = schema_info(check_schema(schema))
                elif not chunk.data.schema.equals(schema, check_metadata=True):
                    raise ConnectionLost("protocol error: a Flight batch with another schema than the stream's")
                # Buffer sizes against lengths, as on the socket: a damaged
                # message must not give numpy a view past its buffer.
                chunk.data.validate()
                if info_of.get("kind") == "structures":
                    b = StructureBatch.from_record_batch(chunk.data, info_of)
                    graphs += b.num_graphs
                else:
                    b = Batch.from_record_batch(chunk.data, info_of)
                    graphs += b.num_graphs // b.twins  # a twin batch holds each graph once per twin
                yield b
        except (fl.FlightError, pa.ArrowException) as e:
            raise flight_error(e) from e
        except (ValueError, TypeError, KeyError, IndexError) as e:
            raise ConnectionLost(f"protocol error: a batch does not decode: {e}") from e
        finally:
            client.close()
        if trailer is None:
            raise ConnectionLost(f"{url}: the stream ended without its trailer after {n} batches: cut")
        stream.trailer = trailer
        stream.sha256 = trailer.get("sha256")  # the server's, when the request asked for it
        if trailer.get("batches") != n or trailer.get("graphs") != graphs or (info.get("batches") is not None and info["batches"] != n):
            raise ConnectionLost(f"{url}: received {n} batches and {graphs} graphs, the trailer says "
                                 f"{trailer.get('batches')} and {trailer.get('graphs')}, the response promised {info.get('batches')}")

    stream = make_stream(batches, info)
    stream._close = client.close
    return stream


def flight_error(e) -> Exception:
    import pyarrow.flight as fl

    # pyarrow maps gRPC codes to exception types only in part (OUT_OF_RANGE
    # and INVALID_ARGUMENT arrive as ArrowInvalid): classify by type, then
    # by the status named in the message.
    msg = str(e)
    low = msg.lower()
    if isinstance(e, fl.FlightUnauthenticatedError) or "unauthenticated" in low:
        return ServerError("unauthenticated", msg)
    if isinstance(e, fl.FlightUnavailableError):
        return ServerError("unavailable", msg)
    if "out-of-range" in low or "out of range" in low:
        return ServerError("out_of_range", msg)
    if "invalid-argument" in low or "invalid argument" in low:
        return ServerError("bad_request", msg)
    return ServerError("internal", msg)
