#!/bin/bash
echo "exiting with 7"
exit 7
