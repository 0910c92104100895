"""moto extensions for what moto 5.2.5 lacks, following the API reference: SageMaker UpdateEndpoint,
and CreateEndpointConfig's ``MetricsConfig`` (moto drops it; the API keeps it and DescribeEndpointConfig
returns it, e.g. ``{"EnableDetailedObservability": true, "MetricPublishFrequencyInSeconds": 60}``).

UpdateEndpoint (documented behaviour): the endpoint must exist and not be updating; the config must
exist; the status becomes ``Updating`` while the current EndpointConfigName keeps serving and the
new one shows in ``PendingDeploymentSummary``; when the deployment ends the status is ``InService``
and the new config is current, or after a (blue/green auto-)rollback ``InService`` on the old config
with a FailureReason. Tests end a deployment explicitly with :func:`settle`, then deliver the
EventBridge "SageMaker Endpoint State Change" event that SageMaker would send (:func:`state_change_event`).
"""

from __future__ import annotations

import base64
import json
from typing import Any

from moto.core.exceptions import JsonRESTError
from moto.core.utils import utcnow
from moto.kms.responses import KmsResponse
from moto.sagemaker import models as sm_models
from moto.sagemaker.exceptions import ValidationError
from moto.sagemaker.responses import SageMakerResponse

_PENDING_CONFIG: dict[str, dict[str, Any]] = {}
UPDATES: list[dict[str, Any]] = []
"""Every accepted UpdateEndpoint request (for assertions on DeploymentConfig and retain flags)."""


def _update_endpoint(self: sm_models.SageMakerModelBackend, endpoint_name: str, endpoint_config_name: str,
                     request: dict[str, Any]) -> str:
    endpoint = self.endpoints.get(endpoint_name)
    if endpoint is None:
        arn = sm_models.FakeEndpoint.arn_formatter(endpoint_name, self.account_id, self.region_name)
        raise ValidationError(message=f"Could not find endpoint '{arn}'.")
    if endpoint.endpoint_status != "InService":
        raise ValidationError(message=f"Cannot update in-progress endpoint '{endpoint.arn}'.")
    config = self.describe_endpoint_config(endpoint_config_name)  # raises ValidationError when missing
    endpoint.endpoint_status = "Updating"
    endpoint.pending_deployment_summary = {"EndpointConfigName": endpoint_config_name, "StartTime": utcnow()}
    _PENDING_CONFIG[endpoint.arn] = config
    endpoint.last_modified_time = utcnow()
    UPDATES.append({"EndpointName": endpoint_name, "EndpointConfigName": endpoint_config_name, **request})
    return endpoint.arn


def _update_endpoint_response(self: SageMakerResponse) -> Any:
    from moto.core.responses import ActionResult
    request = {k: self._get_param(k) for k in ("RetainAllVariantProperties", "ExcludeRetainedVariantProperties",
                                               "DeploymentConfig", "RetainDeploymentConfig")}
    arn = self.sagemaker_backend.update_endpoint(self._get_param("EndpointName"),
                                                 self._get_param("EndpointConfigName"), request)
    return ActionResult({"EndpointArn": arn})


_CREATE_ENDPOINT_CONFIG = SageMakerResponse.create_endpoint_config


def _create_endpoint_config_response(self: SageMakerResponse) -> Any:
    result = _CREATE_ENDPOINT_CONFIG(self)
    metrics = self._get_param("MetricsConfig")
    if metrics:  # FakeEndpointConfig describes every attribute it has: metrics_config -> MetricsConfig
        self.sagemaker_backend.endpoint_configs[self._get_param("EndpointConfigName")].metrics_config = metrics
    return result


def _kms_sign_or_verify(original: Any, verifying: bool) -> Any:
    """KMS Sign and Verify with ``MessageType=DIGEST`` (moto signs the digest as if it were the message): the
    message is the SHA-256 digest of what is signed, and ECDSA signs or checks it as that digest. Verify of a
    signature the key did not make fails with ``KMSInvalidSignatureException``, as KMS answers (moto returns
    ``SignatureValid: false``)."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec, utils

    def handle(self: Any) -> str:
        if self._get_param("MessageType") != "DIGEST":
            answer: str = original(self)
            if verifying and not json.loads(answer).get("SignatureValid"):
                raise KmsInvalidSignature()
            return answer
        key = self.kms_backend.describe_key(self._get_param("KeyId"))
        if self._get_param("SigningAlgorithm") != "ECDSA_SHA_256" or key.key_spec != "ECC_NIST_P256":
            raise ValidationError(message="this extension signs digests with ECC_NIST_P256 keys and ECDSA_SHA_256")
        digest = _blob(self._get_param("Message"))
        if len(digest) != 32:
            raise ValidationError(message="Digest is invalid length for algorithm ECDSA_SHA_256.")
        private = key.private_key.private_key
        algorithm = ec.ECDSA(utils.Prehashed(hashes.SHA256()))
        if not verifying:
            signature = base64.b64encode(private.sign(digest, algorithm)).decode()
            return json.dumps({"KeyId": key.arn, "Signature": signature, "SigningAlgorithm": "ECDSA_SHA_256"})
        try:
            private.public_key().verify(_blob(self._get_param("Signature")), digest, algorithm)
        except InvalidSignature:
            raise KmsInvalidSignature() from None
        return json.dumps({"KeyId": key.arn, "SignatureValid": True, "SigningAlgorithm": "ECDSA_SHA_256"})
    return handle


def _blob(value: Any) -> bytes:
    """A Blob parameter as moto hands it over: base64 text of the bytes (the JSON protocol's encoding)."""
    return base64.b64decode(value) if isinstance(value, str) else bytes(value)


class KmsInvalidSignature(JsonRESTError):
    code = 400

    def __init__(self) -> None:
        super().__init__("KMSInvalidSignatureException", "")


def install() -> None:
    """Register UpdateEndpoint, CreateEndpointConfig's MetricsConfig and KMS digest signing (idempotent)."""
    sm_models.SageMakerModelBackend.update_endpoint = _update_endpoint
    SageMakerResponse.update_endpoint = _update_endpoint_response
    SageMakerResponse.create_endpoint_config = _create_endpoint_config_response
    if not getattr(KmsResponse.sign, "hyperwarm", False):
        for name, verifying in (("sign", False), ("verify", True)):
            handler = _kms_sign_or_verify(getattr(KmsResponse, name), verifying)
            handler.hyperwarm = True
            setattr(KmsResponse, name, handler)


def settle(backend: sm_models.SageMakerModelBackend, endpoint_name: str, *, succeed: bool = True) -> None:
    """End the deployment: the new config becomes current, or the endpoint rolls back to the old one."""
    endpoint = backend.endpoints[endpoint_name]
    summary = endpoint.pending_deployment_summary
    if succeed:
        endpoint.endpoint_config_name = summary["EndpointConfigName"]
        endpoint.production_variants = endpoint._process_production_variants(
            _PENDING_CONFIG.pop(endpoint.arn)["ProductionVariants"])
        endpoint.failure_reason = None
    else:
        endpoint.failure_reason = "Auto-rollback: alarm in ALARM during blue/green baking"
    endpoint.endpoint_status = "InService"
    endpoint.pending_deployment_summary = None
    endpoint.last_modified_time = utcnow()


def backend(account: str = "123456789012", region: str = "us-west-2") -> sm_models.SageMakerModelBackend:
    return sm_models.sagemaker_backends[account][region]


def state_change_event(sm: Any, endpoint_name: str) -> dict[str, Any]:
    """The EventBridge event SageMaker sends for the endpoint's current state."""
    described = sm.describe_endpoint(EndpointName=endpoint_name)
    detail = {"EndpointName": endpoint_name, "EndpointArn": described["EndpointArn"],
              "EndpointConfigName": described["EndpointConfigName"], "EndpointStatus": described["EndpointStatus"],
              "CreationTime": 0, "LastModifiedTime": 0, "Tags": {}}
    if described.get("FailureReason"):
        detail["FailureReason"] = described["FailureReason"]
    return {"version": "0", "id": "5c2d1f2e-0000-4000-8000-000000000001", "detail-type": "SageMaker Endpoint State Change",
            "source": "aws.sagemaker", "account": "123456789012", "time": "2026-11-29T12:00:00Z",
            "region": "us-west-2", "resources": [described["EndpointArn"]], "detail": detail}
