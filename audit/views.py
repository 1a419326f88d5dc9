"""The site-wide audit page (managers): filter by actor, action, object and date; CSV export."""

from __future__ import annotations

import csv
import json

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponseBase, StreamingHttpResponse

from accounts import roles
from accounts.selectors import user_has_role
from audit import selectors

CSV_COLUMNS = (
    "seq",
    "occurred_at",
    "actor_kind",
    "actor_name",
    "actor_token",
    "action",
    "object_type",
    "object_id",
    "object_repr",
    "before",
    "after",
    "request_id",
    "source_address",
    "prev_hash",
    "hash",
)


class _Echo:
    def write(self, value: str) -> str:
        return value


@login_required
def audit_list_page(request: HttpRequest) -> HttpResponseBase:
    from django.shortcuts import render

    if not user_has_role(request.user, roles.MANAGER):
        return render(request, "audit/audit_list.html", {"forbidden": True}, status=403)
    filters = {key: request.GET.get(key, "") for key in selectors.FILTERS}
    events = selectors.event_list(filters=filters)
    if request.GET.get("format") == "csv":
        writer = csv.writer(_Echo())

        def rows() -> object:
            yield writer.writerow(CSV_COLUMNS)
            for event in events.order_by("seq").iterator(chunk_size=2000):
                payload = selectors.event_payload(event)
                yield writer.writerow(
                    [
                        json.dumps(payload[c], sort_keys=True)
                        if c in ("before", "after")
                        else ("" if payload[c] is None else payload[c])
                        for c in CSV_COLUMNS
                    ]
                )

        response = StreamingHttpResponse(rows(), content_type="text/csv")  # type: ignore[arg-type]
        response["Content-Disposition"] = 'attachment; filename="specportal-audit.csv"'
        return response
    page = Paginator(events, 100).get_page(request.GET.get("page"))
    query = "&".join(f"{k}={v}" for k, v in filters.items() if v)
    return render(
        request,
        "audit/audit_list.html",
        {
            "page": page,
            "events": list(page.object_list),
            "filters": filters,
            "choices": selectors.filter_choices(),
            "query": query,
        },
    )
