"""An operator's own route tables: loaded, walked, diffed, installed (`twin routes`).

    tables     what a node holds, in the plan's terms, with where each item came from
    formats    the files tables come in (one Registry, FORMATS): iproute2 JSON and batch
               lines and its rules, SONiC config_db, FRR's running config, NVUE
    walk       a packet's way hop by hop through a fabric's tables (pure)
    check      every path fabric.paths defines, walked: findings naming node and route
    diff       tables against twin's plan, with the paths each difference breaks
"""
