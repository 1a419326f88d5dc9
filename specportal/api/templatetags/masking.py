"""``{{ text|mask_credentials }}``: a URL's password masked where a page shows what an operator or
an agent typed (a launch command, an endpoint's address)."""

from __future__ import annotations

from django import template

from specportal.api.secrets import mask_credentials as _mask

register = template.Library()


@register.filter
def mask_credentials(value: object) -> str:
    return _mask(str(value))
