from django.urls import path

from audit import apis, views

urlpatterns = [
    path("api/v1/audit/events/", apis.AuditEventListApi.as_view(), name="api-audit-events"),
    path("audit/", views.audit_list_page, name="audit-list"),
]
