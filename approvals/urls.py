from django.urls import path

from approvals import apis, views

urlpatterns = [
    path("api/v1/deployments/", apis.DeploymentListApi.as_view(), name="api-deployments"),
    path(
        "api/v1/deployments/<slug:name>/",
        apis.DeploymentDetailApi.as_view(),
        name="api-deployment",
    ),
    path(
        "api/v1/deployments/<slug:name>/history/",
        apis.DeploymentHistoryApi.as_view(),
        name="api-deployment-history",
    ),
    path(
        "api/v1/deployments/<slug:name>/accepted-objectives/",
        apis.DeploymentObjectivesAcceptApi.as_view(),
        name="api-deployment-objectives-accept",
    ),
    path(
        "api/v1/change-requests/", apis.ChangeRequestListApi.as_view(), name="api-change-requests"
    ),
    path(
        "api/v1/change-requests/<int:change_request_id>/",
        apis.ChangeRequestDetailApi.as_view(),
        name="api-change-request",
    ),
    *(
        path(
            f"api/v1/change-requests/<int:change_request_id>/{action}/",
            view.as_view(),
            name=f"api-change-request-{action}",
        )
        for action, view in (
            ("open", apis.ChangeRequestOpenApi),
            ("withdraw", apis.ChangeRequestWithdrawApi),
            ("approve", apis.ChangeRequestApproveApi),
            ("reject", apis.ChangeRequestRejectApi),
            ("apply", apis.ChangeRequestApplyApi),
            ("comments", apis.ChangeRequestCommentApi),
        )
    ),
    path("deployments/", views.deployment_list_page, name="deployment-list"),
    path("deployments/<slug:name>/", views.deployment_page, name="deployment-page"),
    path("change-requests/new/", views.change_request_new_page, name="change-request-new"),
    path(
        "change-requests/<int:change_request_id>/",
        views.change_request_page,
        name="change-request-page",
    ),
    path("approvals/inbox/", views.inbox_page, name="approvals-inbox"),
]
