"""The Arrow Flight transport: the request as a DoGet ticket, the batches
as FlightData (pyarrow.flight)."""
from __future__ import annotations

import json
from urllib.parse import urlparse

import pyarrow as pa

from ._wire import ConnectionLost, ServerError
from .batch import Batch


def location(url: str) -> str:
    u = urlparse(url)
    return f"grpc+unix://{u.path}" if u.scheme == "grpc+unix" else f"grpc+tcp://{u.netloc}"


def open_stream(url: str, req: dict, token, timeout, make_stream):
    import pyarrow.flight as fl

    client = fl.FlightClient(location(url))
    headers = [(b"authorization", f"Bearer {token}".encode())] if token else []
    opts = fl.FlightCallOptions(headers=headers, timeout=timeout)
    try:
        reader = client.do_get(fl.Ticket(json.dumps(req).encode()), opts)
    except (fl.FlightError, pa.ArrowException) as e:
        client.close()
        raise flight_error(e) from e

    def batches(stream):
        n = 0
        try:
            for chunk in reader:
                n += 1
                yield Batch.from_record_batch(chunk.data)
        except (fl.FlightError, pa.ArrowException) as e:
            raise flight_error(e) from e
        except (ValueError, TypeError, KeyError, IndexError) as e:
            raise ConnectionLost(f"protocol error: a batch does not decode: {e}") from e
        finally:
            client.close()
        stream.trailer = {"batches": n}

    return make_stream(batches, {"batches": None})


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
