"""What crosses the wire over Flight is held to the socket's standard: a
stream whose schema is not the protocol's (a foreign or damaged Flight
service) is refused with ConnectionLost before a batch reaches the
trainer; the socket reader has always checked it (test_wire.py)."""
import threading

import pyarrow as pa
import pyarrow.flight as fl
import pytest

import augloader
from augloader._wire import ConnectionLost


class Foreign(fl.FlightServerBase):
    """A Flight service that answers any ticket with table."""

    def __init__(self, table):
        super().__init__("grpc+tcp://127.0.0.1:0")
        self.table = table

    def get_flight_info(self, context, descriptor):
        return fl.FlightInfo(self.table.schema, descriptor, [], self.table.num_rows, -1)

    def do_get(self, context, ticket):
        return fl.RecordBatchStream(self.table)


@pytest.fixture
def foreign():
    servers = []

    def start(table):
        s = Foreign(table)
        threading.Thread(target=s.serve, daemon=True).start()
        servers.append(s)
        return f"grpc://127.0.0.1:{s.port}"

    yield start
    for s in servers:
        s.shutdown()


def test_foreign_flight_stream_refused(foreign):
    url = foreign(pa.table({"a": [1, 2, 3]}))
    with pytest.raises(ConnectionLost, match="schema metadata lacks"):
        list(augloader.connect(url).epoch(0))


def test_flight_stream_with_the_metadata_but_other_columns_refused(synth_shards, daemon, foreign):
    # The protocol's metadata, taken from a real daemon's stream, over
    # columns that are not the protocol's: refused naming the columns.
    d = daemon("--shards", synth_shards, "--policy", "none")
    real = next(iter(augloader.connect(d.grpc).epoch(0))).record
    table = pa.table({"graph_id": pa.array([0, 1], pa.int64())}).replace_schema_metadata(real.schema.metadata)
    url = foreign(table)
    with pytest.raises(ConnectionLost, match="batch columns"):
        list(augloader.connect(url).epoch(0))
