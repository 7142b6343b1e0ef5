"""PD-Verify dashboard – the frame only: page config, session defaults, navigation.

Run with ``streamlit run app.py``. The pages live in ``pages/`` (UI only), the
Streamlit pieces they share in ``widgets/``, and everything they run and draw
from – launches, views, tables, figures – in ``dashboard/``, without Streamlit.
"""

from pathlib import Path

import streamlit as st

from dashboard.settings import session_defaults

# the icon is a file of the package, served by the dashboard itself: a material or emoji icon would make the
# browser fetch it from a font CDN, which fails offline (nothing the page shows leaves 127.0.0.1)
PAGE_ICON = Path(__file__).parent / "dashboard" / "assets" / "page_icon.png"
st.set_page_config(page_title="PD-Verify", page_icon=str(PAGE_ICON), layout="wide")
# metric tiles sit three to a row in each engine's panel: at laptop widths Streamlit's default figure size
# cuts "1,266" to "1.."; a smaller figure fits
st.html("<style>[data-testid='stMetricValue']{font-size:1.6rem}</style>")

for key, value in session_defaults().items():
    st.session_state.setdefault(key, value)

# URL paths differ from the file names on purpose: until some session has run this file, Streamlit
# treats pages/ as a directory of pages, and a first visit straight to /<file name> would skip this frame
live = st.Page("pages/live_run.py", title="Live run", icon=":material/monitoring:", url_path="live")
pages = [
    live,
    st.Page("pages/sweep_run.py", title="Sweep", icon=":material/stacked_line_chart:", url_path="sweep"),
    st.Page("pages/saved_runs.py", title="Runs", icon=":material/folder_open:", url_path="runs"),
    st.Page("pages/inspect_request.py", title="Inspect", icon=":material/text_select_start:", url_path="inspect"),
]


def home() -> None:
    st.switch_page(live)


# Streamlit serves its default page at / only, so a default Live run page would not answer at /live: the
# default is this hidden page, which opens Live run at its own address
start = st.Page(home, title="PD-Verify", url_path="home", default=True, visibility="hidden")
st.navigation([start, *pages], position="top").run()
