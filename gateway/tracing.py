"""Traces for an OpenTelemetry collector (optional): a span per request, per turn and per
stage of a turn or an ingest, carrying counts, timings and names from this code base only
(route templates, stage names) — never a question, passage, title, id or key.

Off unless `KBGATE_OTLP_ENDPOINT` is set; then the `otel` extra (opentelemetry-sdk and its
OTLP/HTTP exporter) must be installed. A request's W3C `traceparent` is continued. No
global provider is installed: the gateway's `Telemetry` holds this object.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter
    from opentelemetry.trace import Tracer

    from settings.config import Config

#: an attribute's value: a count, a timing, or a name from this code base
Attribute = int | float | bool | str
_OFF: AbstractContextManager[None] = nullcontext()


class Tracing:
    """Spans to an exporter, or nothing (`Tracing.off()`: every call a no-op)."""

    def __init__(self, provider: TracerProvider | None) -> None:
        self._provider = provider
        self._tracer: Tracer | None = provider.get_tracer("kbgate") if provider else None

    @classmethod
    def off(cls) -> Tracing:
        return cls(None)

    @classmethod
    def to(cls, exporter: SpanExporter, *, batched: bool = True) -> Tracing:
        """Spans exported by `exporter` (batched in the background, or one by one)."""
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

        provider = TracerProvider(resource=Resource.create({"service.name": "kbgate"}))
        processor = BatchSpanProcessor(exporter) if batched else SimpleSpanProcessor(exporter)
        provider.add_span_processor(processor)
        return cls(provider)

    @property
    def enabled(self) -> bool:
        return self._tracer is not None

    def span(self, name: str, **attributes: Attribute) -> AbstractContextManager[Any]:
        """A span around a block, child of the current one."""
        if self._tracer is None:
            return _OFF
        # an exception's message may quote the caller's input: its type is not recorded either
        return self._tracer.start_as_current_span(
            name, attributes=attributes, record_exception=False
        )

    def server_span(
        self, name: str, headers: Iterable[tuple[bytes, bytes]], **attributes: Attribute
    ) -> AbstractContextManager[Any]:
        """A request's span, continuing the caller's W3C trace context when it sent one."""
        if self._tracer is None:
            return _OFF
        return self._server_span(self._tracer, name, headers, attributes)

    @staticmethod
    @contextmanager
    def _server_span(
        tracer: Tracer,
        name: str,
        headers: Iterable[tuple[bytes, bytes]],
        attributes: Mapping[str, Attribute],
    ) -> Iterator[Any]:
        from opentelemetry.trace import SpanKind
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        carrier = {
            key.decode("latin-1").lower(): value.decode("latin-1")
            for key, value in headers
            if key.lower() in (b"traceparent", b"tracestate")
        }
        parent = TraceContextTextMapPropagator().extract(carrier)
        with tracer.start_as_current_span(
            name,
            context=parent,
            kind=SpanKind.SERVER,
            attributes={"http.request.method": name, **attributes},
            record_exception=False,
        ) as span:
            yield span

    def stages(
        self, name: str, laps: Iterable[tuple[str, int, int]], **attributes: Attribute
    ) -> None:
        """Spans that already ended: one per `(stage, start_ns, end_ns)` (wall clock),
        named `<name>.<stage>`, children of the current span."""
        if self._tracer is None:
            return
        for stage, started, ended in laps:
            span = self._tracer.start_span(
                f"{name}.{stage}", start_time=started, attributes=attributes
            )
            span.end(end_time=ended)

    def close(self) -> None:
        """Export what is pending and stop."""
        if self._provider is not None:
            self._provider.shutdown()


def build_tracing(config: Config) -> Tracing:
    """The tracing `config` asks for: to its OTLP endpoint, or off."""
    if config.otlp_endpoint is None:
        return Tracing.off()
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    except ImportError as error:
        from settings.config import ConfigError

        raise ConfigError(
            "KBGATE_OTLP_ENDPOINT needs the otel extra (pip install 'kbgate[otel]')"
        ) from error
    return Tracing.to(OTLPSpanExporter(endpoint=config.otlp_endpoint))
