from django.urls import path

from runs import views

urlpatterns = [
    path("", views.home, name="home"),
    path("configurations/", views.configuration_list_page, name="configuration-list"),
    path("configurations/<int:config_id>/", views.configuration_page, name="configuration"),
    path("hosts/", views.host_list_page, name="host-list"),
]
