"""Amazon DataZone, checked with its own rules: the README's DataZone line (openlineage-python's
``amazon_datazone_api`` transport inside the project's spool) against a loopback stand-in that checks every request
with botocore's own service model of ``PostLineageEvent``: its method and path, the ``domainIdentifier`` pattern, the
``event`` blob's 300,000 bytes, the ``Client-Token`` pattern, and the SigV4 signature, recomputed with botocore's
signer. Every RunEvent arrives once, unchanged; what DataZone can never take is set aside with why; with the stand-in
down events wait in the spool and go when it is back."""

from __future__ import annotations

import json
import re
import uuid
from datetime import UTC, datetime
from urllib.parse import unquote, urlsplit

import botocore.session
import pytest
import requests
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from openlineage.client.event_v2 import Dataset, Job, JobEvent, Run, RunEvent, RunState
from openlineage.client.serde import Serde
from openlineage.client.transport import get_default_factory

from include.core import settings
from include.lineage.emit.spool import UNDELIVERABLE, SpoolingTransport
from tests.support import QuietHandler, free_port, loopback_server

ACCESS_KEY, SECRET_KEY, REGION = "AKIDEXAMPLESTANDIN", "stand-in-secret-key/0123456789abcdef", "eu-west-1"
MODEL = botocore.session.get_session().get_service_model("datazone")
OPERATION = MODEL.operation_model("PostLineageEvent")
PRODUCER = "https://github.com/OpenLineage/OpenLineage/tree/1.54.0/client/python"


def readme_datazone_transport() -> dict:
    readme = (settings.PROJECT_ROOT / "README.md").read_text()
    section = readme.split("#### Amazon DataZone", 1)[1]
    return json.loads(re.search(r"^transport = (.+)$", section, re.MULTILINE).group(1))


class DataZoneStandIn(QuietHandler):
    """``PostLineageEvent`` as botocore's model of DataZone defines it; anything else is answered as DataZone would:
    404 for another path, 400 ``ValidationException``, 403 ``InvalidSignatureException``."""

    received: list[bytes] = []
    refused: list[tuple[int, str]] = []

    def _answer(self, status: int, body: dict) -> None:
        if status >= 300:
            self.refused.append((status, body.get("message", "")))
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        path = re.escape(OPERATION.http["requestUri"]).replace(r"\{domainIdentifier\}", "(?P<domain>[^/]+)")
        found = re.fullmatch(path, urlsplit(self.path).path)
        if self.command != OPERATION.http["method"] or found is None:
            return self._answer(404, {"message": f"no operation at {self.path}"})
        members = OPERATION.input_shape.members
        domain = unquote(found["domain"])
        if not re.fullmatch(members["domainIdentifier"].metadata["pattern"], domain):
            return self._answer(400, {"message": f"ValidationException: domainIdentifier {domain!r}"})
        if len(body) > members["event"].metadata["max"]:
            return self._answer(400, {"message": f"ValidationException: event of {len(body)} bytes"})
        token = self.headers.get(members["clientToken"].serialization["name"])
        if token is not None and not re.fullmatch(members["clientToken"].metadata["pattern"], token):
            return self._answer(400, {"message": "ValidationException: Client-Token"})
        problem = self._signature_problem(body)
        if problem:
            return self._answer(403, {"message": f"InvalidSignatureException: {problem}"})
        self.received.append(body)
        self._answer(200, {"domainId": domain, "id": uuid.uuid4().hex[:14]})

    def _signature_problem(self, body: bytes) -> str | None:
        """The SigV4 signature, recomputed with botocore's own signer for the headers the request says it signed."""
        found = re.fullmatch(
            r"AWS4-HMAC-SHA256 Credential=(?P<key>[^/]+)/(?P<date>\d{8})/(?P<region>[^/]+)/(?P<service>[^/]+)/"
            r"aws4_request, SignedHeaders=(?P<signed>[^,]+), Signature=(?P<signature>[0-9a-f]{64})",
            self.headers.get("Authorization", ""),
        )
        if found is None:
            return "no SigV4 Authorization header"
        signing_name = MODEL.metadata["signingName"]
        if (found["key"], found["region"], found["service"]) != (ACCESS_KEY, REGION, signing_name):
            return f"signed for {found['key']}/{found['region']}/{found['service']}"
        headers = {name: self.headers[name] for name in found["signed"].split(";")}
        request = AWSRequest(
            method=self.command, url=f"http://{self.headers['Host']}{self.path}", data=body, headers=headers
        )
        request.context["timestamp"] = self.headers["X-Amz-Date"]
        signer = SigV4Auth(Credentials(ACCESS_KEY, SECRET_KEY), signing_name, REGION)
        expected = signer.signature(signer.string_to_sign(request, signer.canonical_request(request)), request)
        return None if expected == found["signature"] else "the signature does not match"


@pytest.fixture
def aws(monkeypatch, tmp_path):
    for name in ("AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DATAZONE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    DataZoneStandIn.received, DataZoneStandIn.refused = [], []


def _run_event(state: RunState, run_id: str, name: str = "datazone_task", padding: int = 0) -> RunEvent:
    facets = {"padding": {"_producer": PRODUCER, "_schemaURL": "https://example.com/Padding.json", "x": "x" * padding}}
    return RunEvent(
        eventType=state,
        eventTime=datetime.now(UTC).isoformat(),
        run=Run(runId=run_id, facets=facets if padding else None),
        job=Job(namespace="pipeline", name=name),
        producer=PRODUCER,
        inputs=[Dataset(namespace="file", name="/in")],
    )


def test_the_readme_datazone_line_delivers_each_run_event_once_and_sets_aside_what_datazone_never_takes(aws, tmp_path):
    config = readme_datazone_transport()
    assert config["inner"]["type"] == "amazon_datazone_api"
    port = free_port()
    config["spool_dir"] = str(tmp_path / "spool")
    config["inner"]["endpointOverride"] = f"http://127.0.0.1:{port}"
    transport = get_default_factory().create(config)
    assert isinstance(transport, SpoolingTransport)
    run_id = str(uuid.uuid4())
    sent = [_run_event(RunState.START, run_id), _run_event(RunState.COMPLETE, run_id)]
    too_large = _run_event(RunState.OTHER, run_id, padding=OPERATION.input_shape.members["event"].metadata["max"])
    job_event = JobEvent(
        eventTime=datetime.now(UTC).isoformat(), job=Job(namespace="pipeline", name="j"), producer=PRODUCER
    )
    with loopback_server(DataZoneStandIn, port):
        for lineage_event in (sent[0], too_large, job_event, sent[1]):
            transport.emit(lineage_event)
    assert DataZoneStandIn.refused == []
    assert [json.loads(body) for body in DataZoneStandIn.received] == [json.loads(Serde.to_json(e)) for e in sent]
    aside = sorted((tmp_path / "spool" / UNDELIVERABLE).glob("*.reason"))
    reasons = sorted(path.read_text() for path in aside)
    assert len(reasons) == 2 and "takes at most 300,000" in reasons[1] and "RunEvents only" in reasons[0], reasons

    later = [_run_event(RunState.START, str(uuid.uuid4()), "while_down") for _ in range(3)]
    for lineage_event in later:  # the stand-in is down: nothing lost, the events wait in the spool
        transport.emit(lineage_event)
    assert len(transport.spool) == 3
    with loopback_server(DataZoneStandIn, port):
        assert transport.replay() == (3, 0)
    assert [json.loads(body) for body in DataZoneStandIn.received[2:]] == [json.loads(Serde.to_json(e)) for e in later]
    assert DataZoneStandIn.refused == []


def test_the_stand_in_refuses_what_datazone_refuses(aws):
    """It bites: a domain id outside the model's pattern, a body past its 300,000 bytes, a forged signature."""
    import boto3
    from botocore.config import Config

    with loopback_server(DataZoneStandIn) as url:
        loose = boto3.client(
            "datazone", endpoint_url=url, config=Config(parameter_validation=False, retries={"max_attempts": 1})
        )
        for domain, body in (("not-a-domain", b"{}"), ("dzd_ok", b"x" * 300_001)):
            with pytest.raises(Exception, match="400"):
                loose.post_lineage_event(domainIdentifier=domain, event=body)
        forged = requests.post(
            f"{url}/v2/domains/dzd_ok/lineage/events",
            data=b"{}",
            headers={
                "Authorization": f"AWS4-HMAC-SHA256 Credential={ACCESS_KEY}/20250101/{REGION}/datazone/aws4_request, "
                f"SignedHeaders=host;x-amz-date, Signature={'0' * 64}",
                "X-Amz-Date": "20250101T000000Z",
            },
            timeout=5,
        )
        assert forged.status_code == 403
        strict = boto3.client("datazone", endpoint_url=url)
        assert strict.post_lineage_event(domainIdentifier="dzd_ok", event=b"{}")["domainId"] == "dzd_ok"
    assert [status for status, _ in DataZoneStandIn.refused] == [400, 400, 403]


def test_openlineage_pythons_own_datazone_transport_drops_an_event_given_as_json(aws):
    """Why the spool drives its own DataZoneTransport: the stock transport returns quietly for anything but a RunEvent
    object, and every event the spool replays is JSON."""
    from openlineage.client.transport.amazon_datazone import AmazonDataZoneConfig, AmazonDataZoneTransport

    with loopback_server(DataZoneStandIn) as url:
        stock = AmazonDataZoneTransport(AmazonDataZoneConfig.from_dict({"domainId": "dzd_ok", "endpointOverride": url}))
        stock.emit(json.loads(Serde.to_json(_run_event(RunState.START, str(uuid.uuid4())))))
        assert DataZoneStandIn.received == []
        stock.emit(_run_event(RunState.START, str(uuid.uuid4())))
        assert len(DataZoneStandIn.received) == 1
