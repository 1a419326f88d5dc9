from django.urls import path

from notifications import apis, views

urlpatterns = [
    path("api/v1/webhooks/", apis.WebhookListApi.as_view(), name="api-webhooks"),
    path("api/v1/webhooks/<int:webhook_id>/", apis.WebhookDetailApi.as_view(), name="api-webhook"),
    path(
        "api/v1/webhooks/<int:webhook_id>/deliveries/",
        apis.WebhookDeliveriesApi.as_view(),
        name="api-webhook-deliveries",
    ),
    path(
        "api/v1/notifications/email/",
        apis.EmailPreferencesApi.as_view(),
        name="api-notifications-email",
    ),
    path("notifications/", views.notifications_page, name="notifications"),
]
