"""The ``alarms`` section: where every alarm of the environment notifies.

Either an existing SNS topic (``topic_arn``; its policy must let CloudWatch publish), or a new one in
``hyperwarm-<env>-alarms`` with the subscriptions given here, or an address given at deploy time
(``email_parameter``). A production environment must reach someone: a topic ARN or at least one
subscription (:func:`alarm_problems`); a placeholder subscriber reaches no one and fails synth.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field, model_validator

from hyperwarm.constraints import repeated
from hyperwarm.observability import placeholder_problem

from .strict import StrictModel, by_rule, described

TOPIC_ARN = described(r"^arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:[A-Za-z0-9_-]{1,256}$",
                      "an SNS topic ARN, e.g. arn:aws:sns:us-west-2:123456789012:oncall")
_EMAIL = described(r"^[^@\s]+@[^@\s]+\.[^@\s]+$", "an e-mail address, e.g. oncall@yourcompany.com")
_REAL = AfterValidator(by_rule(placeholder_problem))
EMAIL_PARAMETER = "OnCallEmail"
"""The parameter of ``hyperwarm-<env>-alarms`` holding the on-call address given at deploy (``email_parameter``)."""
_HTTPS = described(r"^https://[^\s/]+(/\S*)?$",
                   "an https:// URL, e.g. https://events.pagerduty.com/integration/<key>/enqueue")
_SLACK_WORKSPACE = described(r"^[A-Za-z0-9]{1,255}$", "a Slack workspace id, e.g. T07EA123LEP")
_SLACK_CHANNEL = described(r"^[A-Za-z0-9]{1,255}$", "a Slack channel id, e.g. C07EZ1ABC23")


class SlackChannelConfig(StrictModel):
    workspace_id: str = Field(pattern=_SLACK_WORKSPACE,
                              description="authorized once in the AWS Chatbot console, which shows the id")
    channel_id: str = Field(pattern=_SLACK_CHANNEL)


class AlarmsConfig(StrictModel):
    """Where the environment's alarms go (every alarm of every stack)."""

    topic_arn: str | None = Field(default=None, pattern=TOPIC_ARN,
                                  description="an existing topic; none: hyperwarm-<env>-alarms creates one")
    emails: tuple[Annotated[str, Field(pattern=_EMAIL), _REAL], ...] = Field(default=(),
                                                                               description="e-mail subscribers")
    https_endpoints: tuple[Annotated[str, Field(pattern=_HTTPS), _REAL], ...] = Field(
        default=(), description="HTTPS subscribers (PagerDuty, Opsgenie, ...)")
    slack_channels: tuple[SlackChannelConfig, ...] = Field(default=(), description="Slack channels via AWS Chatbot")
    email_parameter: bool = Field(
        default=False, description="subscribe an e-mail address given at deploy time, not written here: the "
        f"CloudFormation parameter {EMAIL_PARAMETER} of hyperwarm-<env>-alarms (cdk deploy --parameters "
        f"hyperwarm-<env>-alarms:{EMAIL_PARAMETER}=<address> once; later deploys keep it; placeholders are refused)")

    @model_validator(mode="after")
    def _one_kind_of_destination(self) -> AlarmsConfig:
        if self.topic_arn and self.subscribed:
            raise ValueError("topic_arn with emails, https_endpoints, slack_channels or email_parameter: subscribe those to the "
                             "existing topic itself (hyperwarm creates subscriptions only on the topic it creates)")
        for field, values in (("emails", self.emails), ("https_endpoints", self.https_endpoints),
                              ("slack_channels", [c.channel_id for c in self.slack_channels])):
            if repeated(values):
                raise ValueError(f"{field}: {', '.join(repeated(values))} -- each once")
        return self

    @property
    def subscribed(self) -> bool:
        return bool(self.emails or self.https_endpoints or self.slack_channels or self.email_parameter)

    @property
    def reaches_someone(self) -> bool:
        """An existing topic (its owner's subscribers) or at least one subscription."""
        return bool(self.topic_arn) or self.subscribed


def alarm_problems(env: str, production: bool, alarms: AlarmsConfig, region: str) -> list[str]:
    """A production environment's alarms must reach someone, and an existing topic must be in the alarms'
    region (CloudWatch notifies only topics of its own region); ``environments.<env>.alarms...: ... -- rule``."""
    problems = []
    if production and not alarms.reaches_someone:
        problems.append(f"environments.{env}.alarms: {alarms.model_dump(exclude_defaults=True)} -- a production "
                        "environment must notify someone: set alarms.topic_arn (an existing topic CloudWatch may "
                        "publish to), or alarms.emails, alarms.https_endpoints, alarms.slack_channels or "
                        "alarms.email_parameter (an address given at deploy time)")
    topic_region = alarms.topic_arn.split(":")[3] if alarms.topic_arn else region
    if topic_region != region:
        problems.append(f"environments.{env}.alarms.topic_arn: {alarms.topic_arn!r} -- a topic in {topic_region}, "
                        f"while the environment's alarms are in {region}: a CloudWatch alarm notifies only a topic "
                        f"of its own region; name a topic in {region}")
    return problems
