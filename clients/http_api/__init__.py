"""The HTTP admin API every Ketch node serves: JSON under /v1 (OpenAPI at
/v1/openapi.json), Prometheus metrics at /metrics and a status page at /."""
from clients.http_api.admins import BrokerAdmins, ControllerAdmins
from clients.http_api.auth import Caller, HttpAuthError
from clients.http_api.server import AdminHttpServer, AdminSource, HttpSecurity, NodeView, http_security

__all__ = ["AdminHttpServer", "AdminSource", "BrokerAdmins", "Caller", "ControllerAdmins",
           "HttpAuthError", "HttpSecurity", "NodeView", "http_security"]
