"""Show a published dashboard: serve its folder over http on this machine.

A dashboard opened as a file (file://) cannot load asv's JSON, so it shows nothing; served, it
works without internet (``publish`` puts its libraries beside it).

    python3 -m jaxbench_helpers serve [--html-dir html] [--port 8080] [--host 127.0.0.1]
"""

import argparse
import functools
import http.server
import os
import sys

from ..common import paths


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def server(html_dir, host="127.0.0.1", port=0):
    """An http server of ``html_dir`` (port 0: a free one); call serve_forever() on it."""
    handler = functools.partial(_QuietHandler, directory=str(html_dir))
    return http.server.ThreadingHTTPServer((host, port), handler)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python3 -m jaxbench_helpers serve",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--html-dir", default=paths.HTML,
                        help="the published dashboard (default: %(default)s)")
    parser.add_argument("--port", type=int, default=8080, help="default %(default)s; 0: any "
                        "free port")
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to listen on (default %(default)s: this machine only)")
    args = parser.parse_args(argv)
    if not os.path.isfile(os.path.join(args.html_dir, "index.html")):
        print(f"jaxbench serve: no dashboard in {args.html_dir} (no index.html); publish one "
              "first (python3 -m jaxbench_helpers main, or publish --config C)", file=sys.stderr)
        return 2
    try:
        httpd = server(args.html_dir, args.host, args.port)
    except OSError as err:
        print(f"jaxbench serve: cannot listen on {args.host}:{args.port} ({err}); pass another "
              "--port", file=sys.stderr)
        return 2
    host, port = httpd.server_address[:2]
    print(f"jaxbench serve: {os.path.abspath(args.html_dir)} at http://{host}:{port}/ "
          "(Ctrl-C stops it)", flush=True)
    try:
        httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        httpd.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
