// STUB for compiling pocketbert's generated Kotlin on Linux only; never shipped, never run. Android's Context, with
// only what the templates call: https://developer.android.com/reference/android/content/Context
package android.content

import android.content.res.AssetManager
import java.io.File

abstract class Context {
    // https://developer.android.com/reference/android/content/Context#getAssets()
    abstract val assets: AssetManager
    // https://developer.android.com/reference/android/content/Context#getFilesDir()
    abstract val filesDir: File
}
