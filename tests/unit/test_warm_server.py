"""scripts/warm_server.py reads the app's address from streamlit's own options, as start.sh passes them."""

from warm_server import server_url  # scripts/, on pytest.ini's pythonpath


def test_the_address_comes_from_streamlits_options():
    assert server_url([]) == "http://127.0.0.1:8501"
    assert server_url(["--server.port", "8600"]) == "http://127.0.0.1:8600"
    assert server_url(["--server.port=8600", "--server.address", "0.0.0.0"]) == "http://127.0.0.1:8600"
    assert server_url(["--server.address=10.0.0.5", "--server.baseUrlPath", "/class/"]) == \
        "http://10.0.0.5:8501/class"
    assert server_url(["--theme.base", "dark", "--server.port", "9000"]) == "http://127.0.0.1:9000"
