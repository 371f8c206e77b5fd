"""WhiteNoise in front of the demo app, for bench/static.sh: the files of $STATIC_DIR at /static/,
as a Django or Flask site serving its own assets does."""

import os

from whitenoise import WhiteNoise

from headway.demo import app as demo

app = WhiteNoise(demo, root=os.environ["STATIC_DIR"], prefix="static/")
