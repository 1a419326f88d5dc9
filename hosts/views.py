"""Server-rendered pages for GPU hosts (reads only; writes go through the API)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from hosts import selectors


@login_required
def host_list_page(request: HttpRequest) -> HttpResponse:
    return render(request, "hosts/host_list.html", {"hosts": selectors.host_list()})
