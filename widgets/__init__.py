"""Streamlit pieces the pages share; the only package besides ``pages/`` that imports Streamlit.

* ``manager``  – ``run_manager()``: the process's one ``dashboard.run_manager.RunManager``
  (``st.cache_resource``);
* ``controls`` – the Start/Stop buttons and the status card of a page that launches work;
* ``forms``    – the replay settings in the sidebar (Live run, Sweep) -> ``ReplaySpec``,
  and the draft confidence gate the Inspect page shares.

Everything that runs in the background, and everything a page draws from
(views, frames, figures), is in ``dashboard/``, which imports no Streamlit.
"""
