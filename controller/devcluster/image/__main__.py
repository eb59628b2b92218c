import sys

from controller.devcluster.image.build import main

sys.exit(main())
