"""TFRecords written by a plain TensorFlow script (not by tfpipe) -> infer_schema -> train.

Many datasets arrive as TFRecord files of `tf.train.Example` made by someone else's script
(TFDS, the object-detection converters), with keys such as `image/encoded` and no metadata.
`tfpipe.infer_schema` reads the first records and says what it found (JPEG bytes become an
`Image`, an int64 key with "label" in its name a `ClassLabel` whose class count is a guess);
the Pipeline then reads the files with that schema. `tfpipe.fit(model, files, x="image/encoded",
y="image/class/label")` reads them directly too (the same inference), but without metadata an
epoch's length is only found at its end: here the records are counted once instead.

Run:
    python examples/plain_tf_records.py                # small: about 10 s on 2 CPU cores
    python examples/plain_tf_records.py --size large   # 6 classes x 300 images
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import keras
import tensorflow as tf

import tfpipe
from tfpipe.sources.synthetic import make_image_folder

SIZES = {"small": (3, 50, 5), "large": (6, 300, 6)}  # classes, images per class, epochs


def write_plain_tfrecords(image_root: Path, out: Path, num_files: int = 2) -> list[Path]:
    """What a typical hand-written conversion script does, with TensorFlow only."""
    classes = sorted(p.name for p in image_root.iterdir() if p.is_dir())
    jpegs = sorted(image_root.glob("*/*.jpg"))
    order = tf.random.experimental.stateless_shuffle(tf.range(len(jpegs)), seed=[0, 0])
    out.mkdir(parents=True, exist_ok=True)
    files = [out / f"data-{i}.tfrecord" for i in range(num_files)]
    writers = [tf.io.TFRecordWriter(str(f)) for f in files]
    for position, index in enumerate(order.numpy()):
        path = jpegs[index]
        example = tf.train.Example(
            features=tf.train.Features(
                feature={
                    "image/encoded": tf.train.Feature(
                        bytes_list=tf.train.BytesList(value=[path.read_bytes()])
                    ),
                    "image/filename": tf.train.Feature(
                        bytes_list=tf.train.BytesList(value=[path.name.encode()])
                    ),
                    "image/class/label": tf.train.Feature(
                        int64_list=tf.train.Int64List(value=[classes.index(path.parent.name)])
                    ),
                }
            )
        )
        writers[position % num_files].write(example.SerializeToString())
    for writer in writers:
        writer.close()
    return files


def main(argv: list[str] | None = None) -> dict[str, float]:
    """Writes plain TFRecords, infers their schema, trains, and returns the last metrics."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=SIZES, default="small", help="data size (small)")
    parser.add_argument("--workdir", type=Path, default=Path("example-data/plain_tf"))
    args = parser.parse_args(argv)
    num_classes, per_class, epochs = SIZES[args.size]

    images = make_image_folder(
        args.workdir / "images", num_classes=num_classes, per_class=per_class, size=(64, 64)
    )
    files = write_plain_tfrecords(images, args.workdir / "records")
    schema = tfpipe.infer_schema(files)
    print("inferred:", schema)

    # Without tfpipe metadata nobody knows the epoch length: Keras would find it at the end of
    # the first epoch and warn "Your input ran out of data". Count the records once (reading
    # bytes is cheap), repeat the data and say how many steps make an epoch.
    num_records = sum(1 for _ in tf.data.TFRecordDataset([str(f) for f in files]))
    train = (
        tfpipe.Pipeline(files, schema=schema, image_size=(48, 48), rescale=1 / 255)
        .shuffle(seed=0)
        .repeat()
        .batch(16)
        .as_supervised("image/encoded", "image/class/label")
    )
    keras.utils.set_random_seed(0)  # the same initial weights in every run
    model = keras.Sequential(
        [
            keras.Input((48, 48, 3)),
            keras.layers.Conv2D(16, 3, activation="relu"),
            keras.layers.MaxPooling2D(),
            keras.layers.Conv2D(32, 3, activation="relu"),
            keras.layers.GlobalMaxPooling2D(),
            keras.layers.Dense(schema["image/class/label"].num_classes),
        ]
    )
    model.compile(
        keras.optimizers.Adam(3e-3),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    steps = math.ceil(num_records / 16)
    history = tfpipe.fit(
        model, train, epochs=epochs, steps_per_epoch=steps, report=False, verbose=2
    )
    metrics = {name: values[-1] for name, values in history.history.items()}
    print(f"training accuracy {metrics['accuracy']:.2f} (chance {1 / num_classes:.2f})")
    return metrics


if __name__ == "__main__":
    main()
